//! The values of a request, checked once: display text (names, models, serials, operators, zone
//! names), a blade threshold with its default, a time zone. Each is built by one constructor that
//! answers the value or an [`Invalid`] naming the field; the API only reports that as a `422`
//! (decision 197), and the use cases take the checked values, never raw strings.

use crate::rules::DEFAULT_BLADE_THRESHOLD_MS;
use chrono_tz::Tz;

/// Why a value of a request was refused: the JSON Pointer of the field and a sentence.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {detail}")]
pub struct Invalid {
    /// Where the value is in the request body (`/name`, `/polygon`).
    pub pointer: String,
    /// What is wrong with it, in the service's words.
    pub detail: String,
}

impl Invalid {
    pub fn new(pointer: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            detail: detail.into(),
        }
    }

    /// As the `(pointer, detail)` pair the use cases' error lists carry.
    pub fn into_pair(self) -> (String, String) {
        (self.pointer, self.detail)
    }
}

/// The longest name, model or serial of the directory, and of a token's name, in characters.
pub const MAX_TEXT_CHARS: usize = 100;

/// How a kind of display text is checked: its longest length, and whether surrounding spaces are
/// cut off (zone and operator names) or kept as given (the directory's texts, whose order is
/// byte by byte, decision 25).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextRule {
    pub max_chars: usize,
    pub trimmed: bool,
    /// An empty text is accepted (a token's name).
    pub may_be_empty: bool,
}

impl TextRule {
    /// An account's, site's or mower's name, a mower's model or serial.
    pub const DIRECTORY: TextRule = TextRule {
        max_chars: MAX_TEXT_CHARS,
        trimmed: false,
        may_be_empty: false,
    };
    /// A token's name: any text up to the directory's length, empty or blank included.
    pub const TOKEN_NAME: TextRule = TextRule {
        max_chars: MAX_TEXT_CHARS,
        trimmed: false,
        may_be_empty: true,
    };
    /// A virtual zone's name.
    pub const ZONE_NAME: TextRule = TextRule {
        max_chars: crate::watch::zones::MAX_ZONE_NAME_CHARS,
        trimmed: true,
        may_be_empty: false,
    };
    /// An operator's name in an assignment.
    pub const OPERATOR: TextRule = TextRule {
        max_chars: crate::assignment::MAX_OPERATOR_CHARS,
        trimmed: true,
        may_be_empty: false,
    };
}

/// Display text checked by its [`TextRule`]: the one text validator of the service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label(String);

impl Label {
    /// `value` of the field `field` (a name, without the pointer's slash) checked by `rule`.
    pub fn new(field: &str, value: impl Into<String>, rule: TextRule) -> Result<Label, Invalid> {
        let value: String = value.into();
        let value = if rule.trimmed {
            value.trim().to_owned()
        } else {
            value
        };
        let blank = value.trim().is_empty();
        let chars = value.chars().count();
        let too_short = blank && !rule.may_be_empty;
        if too_short || chars > rule.max_chars {
            let max = rule.max_chars;
            let detail = if rule.may_be_empty {
                format!("`/{field}` has more than {max} characters.")
            } else {
                format!("`/{field}` must have 1 to {max} characters, not only spaces.")
            };
            return Err(Invalid::new(format!("/{field}"), detail));
        }
        Ok(Label(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// The largest blade threshold accepted: ten years of blade time, in seconds.
pub const MAX_BLADE_THRESHOLD_SECONDS: f64 = 315_360_000.0;

/// A mower's blade threshold (W6), in milliseconds: [`DEFAULT_BLADE_THRESHOLD_MS`] unless given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BladeThreshold(i64);

impl Default for BladeThreshold {
    fn default() -> Self {
        BladeThreshold(DEFAULT_BLADE_THRESHOLD_MS)
    }
}

impl BladeThreshold {
    /// A threshold given in seconds (1 s to ten years), to the millisecond.
    pub fn from_seconds(seconds: f64) -> Result<BladeThreshold, Invalid> {
        if !seconds.is_finite() || !(1.0..=MAX_BLADE_THRESHOLD_SECONDS).contains(&seconds) {
            return Err(Invalid::new(
                "/blade_threshold_seconds",
                format!(
                    "`/blade_threshold_seconds` is {seconds}; it must be between 1 and \
                     {MAX_BLADE_THRESHOLD_SECONDS}."
                ),
            ));
        }
        Ok(BladeThreshold((seconds * 1000.0).round() as i64))
    }

    /// The threshold given, or the default when none is.
    pub fn or_default(seconds: Option<f64>) -> Result<BladeThreshold, Invalid> {
        seconds.map_or(Ok(BladeThreshold::default()), Self::from_seconds)
    }

    pub fn ms(self) -> i64 {
        self.0
    }
}

/// An IANA time zone name, as `chrono-tz` knows them.
pub fn time_zone(value: &str) -> Result<Tz, Invalid> {
    value.parse().map_err(|_| {
        Invalid::new(
            "/time_zone",
            format!(
                "`/time_zone` is {value:?}, which is not an IANA time zone name (like \
                 `Europe/Berlin`)."
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_text_keeps_its_spaces_and_refuses_blank_or_long() {
        let name = Label::new("name", " a ", TextRule::DIRECTORY).unwrap();
        assert_eq!(name.as_str(), " a ");
        let blank = Label::new("name", "  ", TextRule::DIRECTORY).unwrap_err();
        assert_eq!(blank.pointer, "/name");
        assert!(Label::new("name", "x".repeat(101), TextRule::DIRECTORY).is_err());
        assert!(Label::new("name", "x".repeat(100), TextRule::DIRECTORY).is_ok());
    }

    #[test]
    fn zone_and_operator_names_are_trimmed() {
        let zone = Label::new("name", "  bed ", TextRule::ZONE_NAME).unwrap();
        assert_eq!(zone.as_str(), "bed");
        assert!(Label::new("operator", " ", TextRule::OPERATOR).is_err());
    }

    #[test]
    fn a_token_name_may_be_empty_but_not_long() {
        assert!(Label::new("name", "", TextRule::TOKEN_NAME).is_ok());
        assert!(Label::new("name", "x".repeat(101), TextRule::TOKEN_NAME).is_err());
    }

    #[test]
    fn the_blade_threshold_defaults_to_the_rules_and_is_bounded() {
        assert_eq!(
            BladeThreshold::or_default(None).unwrap().ms(),
            DEFAULT_BLADE_THRESHOLD_MS
        );
        assert_eq!(BladeThreshold::from_seconds(1.5).unwrap().ms(), 1500);
        assert!(BladeThreshold::from_seconds(0.5).is_err());
        assert!(BladeThreshold::from_seconds(f64::NAN).is_err());
    }

    #[test]
    fn a_time_zone_is_an_iana_name() {
        assert_eq!(
            time_zone("Europe/Berlin").unwrap(),
            chrono_tz::Europe::Berlin
        );
        assert_eq!(time_zone("Mars/Olympus").unwrap_err().pointer, "/time_zone");
    }
}
