//! Where the client looks for the daemon: the places, in order, each a
//! socket with the state directory whose exports stand in for that daemon.
//!
//! A socket that is named (`--socket`, `GEVO_SOCKET`, the `[daemon] socket`
//! of a `--config` file) is the only place: the caller chose that daemon,
//! and asking another one instead (registering a build with it, shutting it
//! down) would be a surprise. Without one the client searches each mode's
//! daemon it may use, its own user daemon first, then the system daemon;
//! [`crate::transport::call_first`] takes the first that accepts a
//! connection. docs/client.md describes the order.
//!
//! The config files are read through a function the caller passes, so the
//! order can be tested without touching the machine's files.

use crate::files::{self, FileError};
use crate::paths::{Defaults, Mode};
use std::path::{Path, PathBuf};

/// The environment variable naming the daemon's socket.
pub const SOCKET_ENV: &str = "GEVO_SOCKET";

/// Why a place is on the list; shown next to its socket when nothing answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `--socket`.
    Flag,
    /// The `GEVO_SOCKET` environment variable.
    Env,
    /// The `[daemon] socket` of the `--config` file.
    Config(PathBuf),
    /// A mode's daemon: its config's socket, else the mode's default.
    Mode(Mode),
}

impl Origin {
    /// How an error names the place, or `None` for `--socket` (the user
    /// just typed it).
    pub fn label(&self) -> Option<String> {
        match self {
            Origin::Flag => None,
            Origin::Env => Some(SOCKET_ENV.into()),
            Origin::Config(path) => Some(format!("from {}", path.display())),
            Origin::Mode(Mode::User) => Some("your user daemon".into()),
            Origin::Mode(Mode::System) => Some("the system daemon".into()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub socket: PathBuf,
    /// Where this daemon exports its best variants (read by `best` when no
    /// daemon answers).
    pub state: PathBuf,
    pub origin: Origin,
}

/// What the caller was told: flags and the environment.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub socket: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub config: Option<PathBuf>,
    /// `GEVO_SOCKET`, when set and not empty.
    pub env_socket: Option<PathBuf>,
}

impl Asked {
    /// `GEVO_SOCKET` from the process environment.
    pub fn env_socket_from_process() -> Option<PathBuf> {
        std::env::var_os(SOCKET_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }
}

/// The places and anything worth a warning on the way (a default config
/// that exists but cannot be read is skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub places: Vec<Place>,
    pub warnings: Vec<String>,
}

/// The two keys of gevod.toml the client needs; the daemon validates the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigPaths {
    pub socket: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The error names the path: "cannot read the config PATH: why".
    #[error("cannot read the config {0}")]
    Read(FileError),
    #[error("config {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Parses the `[daemon]` keys of a gevod.toml; relative paths are relative
/// to the config file's directory, not to wherever the client runs.
pub fn parse_config(text: &str, path: &Path) -> Result<ConfigPaths, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let table: toml::Table = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let Some(daemon) = table.get("daemon") else {
        return Ok(ConfigPaths::default());
    };
    let Some(daemon) = daemon.as_table() else {
        return Err(invalid("[daemon] is not a table".into()));
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let get = |key: &str| match daemon.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) if !s.is_empty() => Ok(Some(base.join(s))),
        Some(toml::Value::String(_)) => Err(invalid(format!("[daemon] {key} is empty"))),
        Some(other) => Err(invalid(format!(
            "[daemon] {key} must be a string, not {}",
            other.type_str()
        ))),
    };
    Ok(ConfigPaths {
        socket: get("socket")?,
        state_dir: get("state_dir")?,
    })
}

/// The daemons a client of this mode may use, in the order it tries them:
/// a user's own daemon, then the system daemon; root has only the system
/// daemon (a daemon started by root is the system daemon).
pub fn search_order(mode: Mode) -> Vec<Defaults> {
    match mode {
        Mode::User => vec![
            Defaults::for_mode(Mode::User),
            Defaults::for_mode(Mode::System),
        ],
        Mode::System => vec![Defaults::for_mode(Mode::System)],
    }
}

/// The places to try, in order. `modes` is [`search_order`]'s list; `read`
/// reads a file ([`files::read_text_capped`] outside tests).
pub fn places(
    asked: &Asked,
    modes: &[Defaults],
    read: &dyn Fn(&Path) -> Result<String, FileError>,
) -> Result<Located, ConfigError> {
    let mut warnings = Vec::new();
    // A named config must exist and parse; the modes' own are optional.
    let named = match &asked.config {
        Some(path) => {
            let text = read(path).map_err(ConfigError::Read)?;
            Some(parse_config(&text, path)?)
        }
        None => None,
    };
    let mut mode_configs = Vec::new();
    for defaults in modes {
        let config = match &named {
            Some(config) => config.clone(),
            None => match read(&defaults.config) {
                Ok(text) => parse_config(&text, &defaults.config)?,
                Err(e) if e.is_not_found() => ConfigPaths::default(),
                // One this user may not read (a root-only system config)
                // must not break a build; the error names the file.
                Err(e) => {
                    warnings.push(format!("ignoring {e}"));
                    ConfigPaths::default()
                }
            },
        };
        mode_configs.push(config);
    }
    let state_of = |i: usize| -> PathBuf {
        asked
            .state
            .clone()
            .or_else(|| mode_configs.get(i).and_then(|c| c.state_dir.clone()))
            .or_else(|| modes.get(i).map(|d| d.state.clone()))
            .unwrap_or_else(|| Defaults::current().state)
    };

    let named_socket = asked
        .socket
        .clone()
        .map(|s| (s, Origin::Flag))
        .or_else(|| asked.env_socket.clone().map(|s| (s, Origin::Env)))
        .or_else(|| {
            let socket = named.as_ref()?.socket.clone()?;
            Some((socket, Origin::Config(asked.config.clone()?)))
        });
    let places = match named_socket {
        // A named socket: the state of the first mode (the client's own)
        // unless a flag or config names one.
        Some((socket, origin)) => vec![Place {
            socket,
            state: state_of(0),
            origin,
        }],
        None => {
            let mut places: Vec<Place> = Vec::new();
            for (i, defaults) in modes.iter().enumerate() {
                let socket = mode_configs[i]
                    .socket
                    .clone()
                    .unwrap_or_else(|| defaults.socket.clone());
                if places.iter().any(|p| p.socket == socket) {
                    continue;
                }
                places.push(Place {
                    socket,
                    state: state_of(i),
                    origin: Origin::Mode(defaults.mode),
                });
            }
            places
        }
    };
    Ok(Located { places, warnings })
}

/// The places for this process: its flags, `GEVO_SOCKET`, and the files of
/// its mode's search order.
pub fn places_for_process(
    socket: Option<PathBuf>,
    state: Option<PathBuf>,
    config: Option<PathBuf>,
) -> Result<Located, ConfigError> {
    let asked = Asked {
        socket,
        state,
        config,
        env_socket: Asked::env_socket_from_process(),
    };
    places(&asked, &search_order(Mode::current()), &|path: &Path| {
        files::read_text_capped(path, files::CONFIG_CAP)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io;

    /// What a reader returns for a file that is there but unreadable.
    fn failing(kind: io::ErrorKind) -> impl Fn(&Path) -> Result<String, FileError> {
        move |path: &Path| {
            Err(FileError::Io {
                path: path.to_path_buf(),
                error: kind.into(),
            })
        }
    }

    fn user() -> Defaults {
        Defaults {
            mode: Mode::User,
            config: "/home/u/.config/gevo/gevod.toml".into(),
            state: "/home/u/.local/state/gevo".into(),
            socket: "/run/user/1000/gevo/gevod.sock".into(),
        }
    }

    fn system() -> Defaults {
        Defaults::for_mode(Mode::System)
    }

    /// The places (socket, state, origin label) for `asked` with these
    /// files present.
    fn check(asked: Asked, files: &[(&str, &str)], expect: &[(&str, &str, Option<&str>)]) {
        let files: HashMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        let read = |path: &Path| {
            files.get(path).cloned().ok_or_else(|| FileError::Io {
                path: path.to_path_buf(),
                error: io::ErrorKind::NotFound.into(),
            })
        };
        let got = places(&asked, &[user(), system()], &read).unwrap();
        let got: Vec<(String, String, Option<String>)> = got
            .places
            .iter()
            .map(|p| {
                (
                    p.socket.display().to_string(),
                    p.state.display().to_string(),
                    p.origin.label(),
                )
            })
            .collect();
        let expect: Vec<(String, String, Option<String>)> = expect
            .iter()
            .map(|(s, t, l)| (s.to_string(), t.to_string(), l.map(str::to_string)))
            .collect();
        assert_eq!(got, expect);
    }

    const USER_SOCKET: &str = "/run/user/1000/gevo/gevod.sock";
    const USER_STATE: &str = "/home/u/.local/state/gevo";

    #[test]
    fn without_a_named_socket_the_user_daemon_comes_before_the_system_daemon() {
        check(
            Asked::default(),
            &[],
            &[
                (USER_SOCKET, USER_STATE, Some("your user daemon")),
                (
                    "/run/gevod/gevod.sock",
                    "/var/lib/gevod",
                    Some("the system daemon"),
                ),
            ],
        );
        // Each mode's config moves its own daemon.
        check(
            Asked::default(),
            &[(
                "/etc/gevod/gevod.toml",
                "[daemon]\nsocket = \"/srv/gevod.sock\"\nstate_dir = \"/srv/state\"\n",
            )],
            &[
                (USER_SOCKET, USER_STATE, Some("your user daemon")),
                ("/srv/gevod.sock", "/srv/state", Some("the system daemon")),
            ],
        );
        // --state is every place's state.
        check(
            Asked {
                state: Some("/s".into()),
                ..Asked::default()
            },
            &[],
            &[
                (USER_SOCKET, "/s", Some("your user daemon")),
                ("/run/gevod/gevod.sock", "/s", Some("the system daemon")),
            ],
        );
    }

    #[test]
    fn a_named_socket_is_the_only_place_flag_then_env_then_config() {
        let config = ("/c/gevod.toml", "[daemon]\nsocket = \"c.sock\"\n");
        let all = Asked {
            socket: Some("/flag.sock".into()),
            env_socket: Some("/env.sock".into()),
            config: Some("/c/gevod.toml".into()),
            state: None,
        };
        check(all.clone(), &[config], &[("/flag.sock", USER_STATE, None)]);
        let env = Asked {
            socket: None,
            ..all.clone()
        };
        check(
            env.clone(),
            &[config],
            &[("/env.sock", USER_STATE, Some("GEVO_SOCKET"))],
        );
        let from_config = Asked {
            env_socket: None,
            ..env
        };
        check(
            from_config,
            &[config],
            &[("/c/c.sock", USER_STATE, Some("from /c/gevod.toml"))],
        );
        // A named config without a socket: the search, with its state dir.
        check(
            Asked {
                config: Some("/c/gevod.toml".into()),
                ..Asked::default()
            },
            &[("/c/gevod.toml", "[daemon]\nstate_dir = \"st\"\n")],
            &[
                (USER_SOCKET, "/c/st", Some("your user daemon")),
                ("/run/gevod/gevod.sock", "/c/st", Some("the system daemon")),
            ],
        );
    }

    #[test]
    fn a_named_config_must_be_there_and_a_default_one_may_be_unreadable() {
        let asked = Asked {
            config: Some("/missing.toml".into()),
            ..Asked::default()
        };
        let none = failing(io::ErrorKind::NotFound);
        let err = places(&asked, &[user()], &none).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read the config /missing.toml"),
            "{err}"
        );

        let denied = failing(io::ErrorKind::PermissionDenied);
        let located = places(&Asked::default(), &[user(), system()], &denied).unwrap();
        assert_eq!(located.places.len(), 2);
        assert_eq!(located.warnings.len(), 2, "{:?}", located.warnings);
        assert!(located.warnings[1].starts_with("ignoring /etc/gevod/gevod.toml: "));
    }

    #[test]
    fn the_same_socket_is_tried_once() {
        let mut same = user();
        same.socket = "/run/gevod/gevod.sock".into();
        let none = failing(io::ErrorKind::NotFound);
        let located = places(&Asked::default(), &[same, system()], &none).unwrap();
        assert_eq!(located.places.len(), 1);
    }
}
