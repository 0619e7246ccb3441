//! A test that string options are converted once, where they arrive: the numerics take enums
//! ([`crate::choice::Choice`]) and no function body compares an option's name.
//!
//! Read from the sources, outside test code (the `*tests.rs` files and everything from a file's first
//! `#[cfg(test)]` on): no `match` arm on a string literal and no comparison with one, no `fn parse` but
//! [`crate::choice::parse`], called only by the binding layer (`rust/src/py/`, where a Python argument is
//! extracted), and no option (`method`, `scheme`…) held or passed as a string.

use std::path::{Path, PathBuf};

/// Argument names of the core's string options (their Python keywords).
const OPTIONS: &[&str] = &[
    "method",
    "semi",
    "scheme",
    "noise",
    "shape",
    "ci_method",
    "gam_method",
    "basis",
    "gam_basis",
    "max_edf",
    "fit",
    "kind",
];

/// The types that hold an option as its name.
const STRING_TYPES: &[&str] = &[
    "&str",
    "&'static str",
    "&'a str",
    "&'py str",
    "String",
    "Option<&str>",
    "Option<String>",
    "PyBackedStr",
    "Option<PyBackedStr>",
];

/// Code that the rules below would flag but that chooses no option: (file, code), each with its reason.
const NOT_OPTIONS: &[(&str, &str)] = &[
    // An error's argument name, renamed for the caller, not an option's value.
    ("pcor.rs", r#"if n == "scores""#),
    // A calibration tally's label of its method, going out to Python.
    ("py/simulate.rs", "method: String,"),
];

/// The code of a file that is not test code: up to its first `#[cfg(test)]`, comments removed.
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .map(|line| line.split("//").next().unwrap_or("").to_string())
        .collect()
}

/// Every problem of one file's code (`file`: its path under rust/src; `binding`: a file of `rust/src/py/`).
fn problems_in(file: &str, binding: bool, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let name = Path::new(file)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(file);
    for (number, line) in code_lines(text).iter().enumerate() {
        let at = format!("{file}:{}", number + 1);
        let code = line.trim();
        if NOT_OPTIONS
            .iter()
            .any(|(allowed_file, allowed)| *allowed_file == file && code.contains(allowed))
        {
            continue;
        }
        let arm = code.strip_prefix("Some(").unwrap_or(code);
        if arm.starts_with('"') && (code.contains("=>") || code.ends_with('|')) {
            found.push(format!("{at}: a match arm on a string: {code}"));
        }
        if code.contains("== \"") || code.contains("!= \"") {
            found.push(format!("{at}: a comparison with a string: {code}"));
        }
        if (code.contains("fn parse(") || code.contains("fn parse<")) && name != "choice.rs" {
            found.push(format!("{at}: a parser outside crate::choice: {code}"));
        }
        if code.contains("choice::parse") && !binding && name != "choice.rs" {
            found.push(format!(
                "{at}: an option parsed outside the binding layer: {code}"
            ));
        }
        for option in OPTIONS {
            let declared = format!("{option}: ");
            for (index, _) in code.match_indices(&declared) {
                let joined = code[..index]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
                let typed = &code[index + declared.len()..];
                if !joined && STRING_TYPES.iter().any(|string| typed.starts_with(string)) {
                    found.push(format!("{at}: the option {option} as a string: {code}"));
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some("rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_string_option_is_parsed_in_a_function_body() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("rust/src");
    let mut files = Vec::new();
    rust_files(&source, &mut files);
    let mut problems = Vec::new();
    let mut read = 0;
    for path in files {
        let relative = path.strip_prefix(&source).unwrap().to_string_lossy().to_string();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with("tests.rs") || name == "string_options.rs" || name == "layering.rs" {
            continue;
        }
        let binding = relative.starts_with("py/") || relative.starts_with("py\\");
        problems.extend(problems_in(
            &relative,
            binding,
            &std::fs::read_to_string(&path).unwrap(),
        ));
        read += 1;
    }
    assert!(read >= 25, "read only {read} files of rust/src");
    assert!(
        problems.is_empty(),
        "string options parsed in function bodies:\n{}",
        problems.join("\n")
    );
}

#[test]
fn each_way_of_parsing_a_string_option_is_found() {
    let cases = [
        ("fn f(method: &str) {}", "the option method as a string"),
        ("    scheme: String,", "the option scheme as a string"),
        ("fn g(semi: Option<&str>) {}", "the option semi as a string"),
        (
            "        \"pearson\" => Method::Pearson,",
            "a match arm on a string",
        ),
        ("        Some(\"x\") => Semi::X,", "a match arm on a string"),
        ("    if name == \"auto\" {", "a comparison with a string"),
        (
            "    pub fn parse(name: &str) -> Result<Self> {",
            "a parser outside crate::choice",
        ),
        (
            "    let m = choice::parse::<Method>(name)?;",
            "an option parsed outside the binding layer",
        ),
    ];
    for (code, problem) in cases {
        let found = problems_in("x.rs", false, code);
        assert!(found.iter().any(|f| f.contains(problem)), "{code:?}: {found:?}");
    }
    // Test code, the binding's conversion and an allowed comparison pass.
    assert!(problems_in("x.rs", false, "#[cfg(test)]\nfn f(method: &str) {}").is_empty());
    assert!(problems_in("py/x.rs", true, "let m = choice::parse::<Method>(name)?;").is_empty());
    assert!(problems_in("pcor.rs", false, "if n == \"scores\" => x,").is_empty());
    assert!(!problems_in("simulate.rs", false, "if n == \"scores\" => x,").is_empty());
    assert!(problems_in("x.rs", false, "fn f(method: Method, name: &str) {}").is_empty());
}
