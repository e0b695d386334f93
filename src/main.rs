//! `chapters`: the CLI. One function per subcommand; errors become exit codes
//! (0 done, 1 the operation failed, 2 usage).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
