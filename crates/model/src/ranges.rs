//! The documented range of a numeric setting (a config key or a command-line
//! flag), and the one-line error for a value outside it: the key, the value
//! and the range, `evolve.population: 1000000000 is out of range (4 to 65536)`.
//! Plain values; each module that reads settings declares its own ranges.

use std::time::Duration;

/// The values setting `key` allows: `min` to `max`, both included. `key` is
/// its dotted path in the config file (`evolve.population`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SettingRange<T> {
    pub key: &'static str,
    pub min: T,
    pub max: T,
}

/// A setting that cannot be used: `key: message`, one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct Invalid {
    pub key: String,
    pub message: String,
}

impl Invalid {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Invalid {
        Invalid {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// A value a range can hold, shown as the config file spells it.
pub trait Bounded: PartialOrd + Copy {
    fn show(&self) -> String;
}

macro_rules! bounded_integers {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
bounded_integers!(u32, u64, usize);

impl Bounded for f64 {
    fn show(&self) -> String {
        // TOML's spellings, not Rust's `NaN`.
        match *self {
            v if v.is_nan() => "nan".into(),
            v if v.is_infinite() => if v > 0.0 { "inf" } else { "-inf" }.into(),
            v => v.to_string(),
        }
    }
}

impl Bounded for Duration {
    fn show(&self) -> String {
        show_duration(*self)
    }
}

/// `250ms`, `90s`, `10m`, `24h`: the largest whole unit; `1.5s` beyond a
/// second that is not whole.
pub fn show_duration(d: Duration) -> String {
    if d.subsec_nanos() % 1_000_000 != 0 {
        return format!("{}s", d.as_secs_f64());
    }
    let ms = d.as_millis();
    match ms {
        0 => "0s".into(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms if ms < 1000 => format!("{ms}ms"),
        _ => format!("{}s", d.as_secs_f64()),
    }
}

impl<T: Bounded> SettingRange<T> {
    pub const fn new(key: &'static str, min: T, max: T) -> Self {
        SettingRange { key, min, max }
    }

    /// `4 to 65536`, as the documentation writes it.
    pub fn text(&self) -> String {
        format!("{} to {}", self.min.show(), self.max.show())
    }

    /// `value`, unless it is outside the range (NaN always is).
    pub fn check(&self, value: T) -> Result<T, Invalid> {
        self.check_as(self.key, value)
    }

    /// [`check`](Self::check) for the same setting given another way (a
    /// command-line flag): the error names `name`.
    pub fn check_as(&self, name: &str, value: T) -> Result<T, Invalid> {
        if value >= self.min && value <= self.max {
            Ok(value)
        } else {
            Err(Invalid::new(
                name,
                format!("{} is out of range ({})", value.show(), self.text()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_are_one_line_naming_key_value_and_range() {
        let population = SettingRange::new("evolve.population", 4usize, 65_536);
        let rate = SettingRange::new("evolve.mutation_rate", 0.0, 1.0);
        let poll = SettingRange::new(
            "gpu.poll_interval",
            Duration::from_millis(100),
            Duration::from_secs(600),
        );
        let cases: [(Result<(), Invalid>, &str); 8] = [
            (population.check(4).map(drop), ""),
            (population.check(65_536).map(drop), ""),
            (
                population.check(1_000_000_000).map(drop),
                "evolve.population: 1000000000 is out of range (4 to 65536)",
            ),
            (
                population.check_as("--population", 3).map(drop),
                "--population: 3 is out of range (4 to 65536)",
            ),
            (
                rate.check(f64::NAN).map(drop),
                "evolve.mutation_rate: nan is out of range (0 to 1)",
            ),
            (
                rate.check(f64::INFINITY).map(drop),
                "evolve.mutation_rate: inf is out of range (0 to 1)",
            ),
            (
                poll.check(Duration::from_millis(10)).map(drop),
                "gpu.poll_interval: 10ms is out of range (100ms to 10m)",
            ),
            (
                poll.check(Duration::from_secs_f64(700.5)).map(drop),
                "gpu.poll_interval: 700.5s is out of range (100ms to 10m)",
            ),
        ];
        for (result, expected) in cases {
            match result {
                Ok(()) => assert_eq!(expected, "", "accepted"),
                Err(e) => assert_eq!(e.to_string(), expected),
            }
        }
    }

    #[test]
    fn durations_show_in_their_largest_whole_unit() {
        for (d, shown) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(600), "10m"),
            (Duration::from_secs(86_400), "24h"),
        ] {
            assert_eq!(show_duration(d), shown);
        }
    }
}
