//! Reading the JSON redlock prints (`status --json`, `acquire --json`, `--log-format json`)
//! with serde_json — a parser that shares nothing with the code that writes the documents —
//! and dotted paths (`locks.0.holder.host`) to reach into them. Numbers must be integers, as
//! redlock documents; a document with any other number fails to parse.

pub type Json = serde_json::Value;

/// Dotted-path access to a parsed document; every accessor but `at` panics with the whole
/// document when the path is missing or holds another kind of value.
pub trait Document {
    /// Parses one document; trailing text other than whitespace is an error.
    fn parse(text: &str) -> Result<Json, String>;
    /// The value at a dotted path: object fields by name, array items by index.
    fn at(&self, path: &str) -> Option<&Json>;
    #[track_caller]
    fn expect(&self, path: &str) -> &Json;
    #[track_caller]
    fn int(&self, path: &str) -> i64;
    #[track_caller]
    fn str(&self, path: &str) -> &str;
    #[track_caller]
    fn items(&self, path: &str) -> &[Json];
}

impl Document for Json {
    fn parse(text: &str) -> Result<Json, String> {
        let value: Json = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match first_non_integer(&value) {
            Some(number) => Err(format!("{number} is not an integer")),
            None => Ok(value),
        }
    }

    fn at(&self, path: &str) -> Option<&Json> {
        path.split('.')
            .filter(|step| !step.is_empty())
            .try_fold(self, |value, step| match value {
                Json::Object(fields) => fields.get(step),
                Json::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            })
    }

    fn expect(&self, path: &str) -> &Json {
        self.at(path)
            .unwrap_or_else(|| panic!("no {path:?} in the JSON document {self}"))
    }

    fn int(&self, path: &str) -> i64 {
        self.expect(path)
            .as_i64()
            .unwrap_or_else(|| panic!("{path:?} is not an integer in {self}"))
    }

    fn str(&self, path: &str) -> &str {
        self.expect(path)
            .as_str()
            .unwrap_or_else(|| panic!("{path:?} is not a string in {self}"))
    }

    fn items(&self, path: &str) -> &[Json] {
        self.expect(path)
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_else(|| panic!("{path:?} is not an array in {self}"))
    }
}

fn first_non_integer(value: &Json) -> Option<&serde_json::Number> {
    match value {
        Json::Number(n) if !(n.is_i64() || n.is_u64()) => Some(n),
        Json::Array(items) => items.iter().find_map(first_non_integer),
        Json::Object(fields) => fields.values().find_map(first_non_integer),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_read_into_a_tree_reachable_by_dotted_paths() {
        let doc = Json::parse(
            r#" {"now_ms": 17, "locks": [{"key": "a\"b\\c\u00e9\ud83d\ude00",
                "ttl_left_ms": null, "fence": -3, "held": true, "holder": {}}]} "#,
        )
        .expect("parses");
        assert_eq!(doc.int("now_ms"), 17);
        assert_eq!(doc.str("locks.0.key"), "a\"b\\cé😀");
        assert!(doc.expect("locks.0.ttl_left_ms").is_null());
        assert_eq!(doc.int("locks.0.fence"), -3);
        assert_eq!(doc.at("locks.0.held"), Some(&Json::Bool(true)));
        assert_eq!(
            doc.at("locks.0.holder"),
            Some(&Json::Object(serde_json::Map::new()))
        );
        assert_eq!(doc.at("locks.1"), None);
        assert_eq!(doc.items("locks").len(), 1);
    }

    #[test]
    fn malformed_documents_are_rejected() {
        for text in [
            "",
            "{",
            r#"{"a" 1}"#,
            r#"{"a": 1,}"#,
            "[1 2]",
            "1.5",
            r#"{"a": [2.5]}"#,
            r#""open"#,
            "{} {}",
            "nul",
        ] {
            assert!(Json::parse(text).is_err(), "{text:?} parsed");
        }
    }
}
