//! `chapters`: the CLI. One function per subcommand; errors become exit codes
//! (0 done, 1 the operation failed, 2 usage).

mod cli;

use std::process::ExitCode;

/// jemalloc, not glibc's malloc: the archive's threads hand buffers to each other (decode →
/// parse → sign → render → write) and glibc's arenas took ~10 % of its CPU; jemalloc's thread
/// caches cut the run's CPU ~5 % ("The allocator" in docs/architecture.md). mimalloc, as
/// fast, let peak RSS grow ~18 % from 500 to 8,000 turns.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    cli::run()
}

/// `chapters status | head -1`: Rust ignores SIGPIPE, so once the reader is gone every
/// `println!` panics ("failed printing to stdout: Broken pipe"). A reader that closed the
/// pipe took what it wanted: end quietly with 0, as other Unix tools do, instead of a
/// panic message and exit 101. Resetting SIGPIPE would need `unsafe`, which the crate
/// forbids; every other panic keeps the default report.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}
