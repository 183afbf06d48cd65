//! Where gevod keeps its config, state and socket, in system mode (run as
//! root, normally by systemd) and user mode (everyone else, XDG paths).
//! gevo-client uses the same defaults so that neither needs flags on a
//! machine set up the documented way (`locate` says in which order the
//! client tries them).

use std::path::PathBuf;

pub const SYSTEM_CONFIG: &str = "/etc/gevod/gevod.toml";
pub const SYSTEM_STATE: &str = "/var/lib/gevod";
pub const SYSTEM_SOCKET: &str = "/run/gevod/gevod.sock";
pub const SOCKET_NAME: &str = "gevod.sock";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    System,
    User,
}

impl Mode {
    /// System mode for root, user mode for everyone else.
    pub fn current() -> Mode {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            Mode::System
        } else {
            Mode::User
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    pub mode: Mode,
    pub config: PathBuf,
    pub state: PathBuf,
    pub socket: PathBuf,
}

impl Defaults {
    pub fn for_mode(mode: Mode) -> Defaults {
        match mode {
            Mode::System => Defaults {
                mode,
                config: SYSTEM_CONFIG.into(),
                state: SYSTEM_STATE.into(),
                socket: SYSTEM_SOCKET.into(),
            },
            Mode::User => {
                let env = |k: &str| {
                    std::env::var_os(k)
                        .filter(|v| !v.is_empty())
                        .map(PathBuf::from)
                };
                let home = env("HOME").unwrap_or_else(|| PathBuf::from("."));
                let config = env("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"));
                let state = env("XDG_STATE_HOME")
                    .unwrap_or_else(|| home.join(".local/state"))
                    .join("gevo");
                // The runtime dir is per login session and private; without
                // one the socket lives beside the state.
                let socket = env("XDG_RUNTIME_DIR")
                    .map(|d| d.join("gevo"))
                    .unwrap_or_else(|| state.clone())
                    .join(SOCKET_NAME);
                Defaults {
                    mode,
                    config: config.join("gevo/gevod.toml"),
                    state,
                    socket,
                }
            }
        }
    }

    pub fn current() -> Defaults {
        Defaults::for_mode(Mode::current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn system_mode_uses_the_fhs_paths() {
        let d = Defaults::for_mode(Mode::System);
        assert_eq!(d.config, Path::new("/etc/gevod/gevod.toml"));
        assert_eq!(d.state, Path::new("/var/lib/gevod"));
        assert_eq!(d.socket, Path::new("/run/gevod/gevod.sock"));
    }
}
