//! Options that take one of a closed set of names (`method="pearson"`, `scheme="block"`): each is an enum
//! whose names are declared once, in its [`Choice`] table, and read by the one parser [`parse`].
//!
//! The numerics take the enums; a name is turned into its value once, where it arrives (the binding layer's
//! conversion of a Python argument, a test), so no function body compares strings to choose what to do. An
//! unknown name is an error naming the option and the names it takes.

use crate::error::{Result, StatsError};

/// An option's values and the names that stand for them.
pub trait Choice: Copy + PartialEq + Sized + 'static {
    /// The argument that takes the option, named in its errors.
    const OPTION: &'static str;
    /// What one value is called in an error ("permutation scheme").
    const WHAT: &'static str;
    /// Each value's name, in the order an error lists them; a value may have several (the first is its own).
    const NAMES: &'static [(&'static str, Self)];
    /// Other spellings that are accepted but not listed in errors (`"bca"` for `"BCa"`…).
    const ALIASES: &'static [(&'static str, Self)] = &[];
    /// The value of a missing option (`None` in Python), if it may be left out; errors then list `None` too.
    const MISSING: Option<Self> = None;

    /// The error for a name that is not in the table.
    fn unknown(name: &str) -> StatsError {
        StatsError::invalid(
            Self::OPTION,
            format!("unknown {} {name:?}; expected {}", Self::WHAT, expected::<Self>()),
        )
    }
}

/// The value `name` stands for, or an error naming the option and listing its names.
pub fn parse<T: Choice>(name: &str) -> Result<T> {
    T::NAMES
        .iter()
        .chain(T::ALIASES)
        .find(|(known, _)| *known == name)
        .map(|&(_, value)| value)
        .ok_or_else(|| T::unknown(name))
}

/// The value of an option that may be missing: its [`Choice::MISSING`] value for `None`.
pub fn parse_optional<T: Choice>(name: Option<&str>) -> Result<T> {
    match (name, T::MISSING) {
        (Some(name), _) => parse(name),
        (None, Some(missing)) => Ok(missing),
        (None, None) => Err(StatsError::invalid(T::OPTION, "must be given")),
    }
}

/// A value's own name (the first the table gives it).
pub fn name<T: Choice>(value: T) -> &'static str {
    T::NAMES
        .iter()
        .find(|(_, known)| *known == value)
        .map_or("?", |&(name, _)| name)
}

/// The names an option takes, as an error lists them: `"a" or "b"`, `one of "a", "b", "c"`, with `None`
/// first when the option may be missing.
pub fn expected<T: Choice>() -> String {
    let mut names: Vec<String> = T::NAMES.iter().map(|(name, _)| format!("{name:?}")).collect();
    if T::MISSING.is_some() {
        names.insert(0, "None".to_string());
    }
    match names.split_last() {
        None => "nothing".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, before)) => format!("{} or {last}", before.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Fruit {
        Apple,
        Pear,
        Plum,
    }

    impl Choice for Fruit {
        const OPTION: &'static str = "fruit";
        const WHAT: &'static str = "fruit";
        const NAMES: &'static [(&'static str, Self)] = &[
            ("apple", Fruit::Apple),
            ("pear", Fruit::Pear),
            ("plum", Fruit::Plum),
        ];
        const ALIASES: &'static [(&'static str, Self)] = &[("Apple", Fruit::Apple)];
    }

    #[test]
    fn names_and_aliases_parse_and_others_name_the_option() {
        assert_eq!(parse::<Fruit>("pear"), Ok(Fruit::Pear));
        assert_eq!(parse::<Fruit>("Apple"), Ok(Fruit::Apple));
        assert_eq!(name(Fruit::Apple), "apple");
        let error = parse::<Fruit>("fig").unwrap_err();
        assert_eq!(
            error.to_string(),
            "fruit: unknown fruit \"fig\"; expected \"apple\", \"pear\" or \"plum\""
        );
        assert!(parse_optional::<Fruit>(None).is_err());
    }
}
