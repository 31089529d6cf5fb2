//! Flags from the environment: each binary reads every long flag of a command from a
//! variable too, named from the flag under the binary's prefix, so that a deployment can
//! set flags without wrapping the command line.

/// `command` with every long flag (help and version aside) readable from the environment
/// as `{prefix}{FLAG}` (upper case, `-` as `_`); a flag on the command line wins. Only the
/// command's own flags: its subcommands are left as they are.
pub fn with_env(command: clap::Command, prefix: &str) -> clap::Command {
    command.mut_args(|arg| match arg.get_long() {
        Some(long) if !matches!(long, "help" | "version") => {
            let name = format!("{prefix}{}", long.to_uppercase().replace('-', "_"));
            arg.env(name)
        }
        _ => arg,
    })
}
