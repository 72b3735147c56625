//! Just enough JSON to read the documents redlock prints (`status --json`, `acquire --json`):
//! a strict parser into a tree, and dotted paths (`locks.0.holder.host`) to reach into it.
//! Numbers are integers, as redlock documents; anything else fails the parse.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Arr(Vec<Json>),
    /// Fields in the order they were written.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// Parses one document; trailing text other than whitespace is an error.
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut parser = Parser {
            text: text.as_bytes(),
            at: 0,
        };
        let value = parser.value()?;
        parser.skip_space();
        if parser.at != parser.text.len() {
            return Err(parser.error("trailing text after the document"));
        }
        Ok(value)
    }

    /// The value at a dotted path: object fields by name, array items by index. `None` when
    /// any step is missing.
    pub fn at(&self, path: &str) -> Option<&Json> {
        path.split('.')
            .filter(|step| !step.is_empty())
            .try_fold(self, |value, step| match value {
                Json::Obj(fields) => fields.iter().find(|(k, _)| k == step).map(|(_, v)| v),
                Json::Arr(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            })
    }

    /// The value at `path`, panicking with the whole document when it is missing.
    pub fn expect(&self, path: &str) -> &Json {
        self.at(path)
            .unwrap_or_else(|| panic!("no {path:?} in the JSON document {self}"))
    }

    /// The integer at `path`, panicking when it is missing or not an integer.
    pub fn int(&self, path: &str) -> i64 {
        match self.expect(path) {
            Json::Int(n) => *n,
            other => panic!("{path:?} is {other}, not an integer, in {self}"),
        }
    }

    /// The string at `path`, panicking when it is missing or not a string.
    pub fn str(&self, path: &str) -> &str {
        match self.expect(path) {
            Json::Str(s) => s,
            other => panic!("{path:?} is {other}, not a string, in {self}"),
        }
    }

    /// The items of the array at `path`, panicking when it is missing or not an array.
    pub fn items(&self, path: &str) -> &[Json] {
        match self.expect(path) {
            Json::Arr(items) => items,
            other => panic!("{path:?} is {other}, not an array, in {self}"),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Str(s) => write!(f, "{s:?}"),
            Json::Arr(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Json::Obj(fields) => {
                f.write_str("{")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{name:?}: {value}")?;
                }
                f.write_str("}")
            }
        }
    }
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {what}", self.at)
    }

    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", byte as char)))
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error(&format!("expected {word}")))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::Str),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'n') => self.word("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => Err(self.error("expected a value")),
        }
    }

    fn object(&mut self) -> Result<Json, String> {
        self.eat(b'{')?;
        let mut fields = Vec::new();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Obj(fields));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a field name"));
            }
            let name = self.string()?;
            self.eat(b':')?;
            fields.push((name, self.value()?));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Obj(fields));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self) -> Result<Json, String> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Arr(items));
        }
        loop {
            items.push(self.value()?);
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Arr(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn integer(&mut self) -> Result<Json, String> {
        let start = self.at;
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        if matches!(self.text.get(self.at), Some(b'.' | b'e' | b'E')) {
            return Err(self.error("redlock's numbers are integers"));
        }
        let digits = std::str::from_utf8(&self.text[start..self.at]).expect("ASCII digits");
        digits
            .parse()
            .map(Json::Int)
            .map_err(|e| self.error(&format!("bad integer {digits:?}: {e}")))
    }

    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut bytes = Vec::new();
        loop {
            let Some(&byte) = self.text.get(self.at) else {
                return Err(self.error("unterminated string"));
            };
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let Some(&escape) = self.text.get(self.at) else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.at += 1;
                    let plain = match escape {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let c = self.unicode_escape()?;
                            let mut buf = [0; 4];
                            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return Err(self.error("unknown escape")),
                    };
                    bytes.push(plain);
                }
                0..=0x1f => return Err(self.error("control character in a string")),
                _ => bytes.push(byte),
            }
        }
        String::from_utf8(bytes).map_err(|_| self.error("string is not UTF-8"))
    }

    /// The four hex digits after `\u`, joined with a following low surrogate when needed.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let first = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&first) {
            if !self.text[self.at..].starts_with(b"\\u") {
                return Err(self.error("lone high surrogate"));
            }
            self.at += 2;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(self.error("bad low surrogate"));
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        } else {
            first
        };
        char::from_u32(code).ok_or_else(|| self.error("escape is no character"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .ok_or_else(|| self.error("short \\u escape"))?;
        let code = u32::from_str_radix(digits, 16).map_err(|_| self.error("bad \\u escape"))?;
        self.at += 4;
        Ok(code)
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
        assert_eq!(doc.at("locks.0.holder"), Some(&Json::Obj(Vec::new())));
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
            r#""open"#,
            "{} {}",
            "nul",
        ] {
            assert!(Json::parse(text).is_err(), "{text:?} parsed");
        }
    }
}
