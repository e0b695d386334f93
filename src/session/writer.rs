//! A DSH log writer: produces real session logs (zstd multi-frame or plain) for tests,
//! benchmarks and `chapters demo`. OWNER: session helper.
