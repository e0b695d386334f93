//! `chapters demo`: a generated session in a scratch home, archived, and what was written.
