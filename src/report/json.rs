//! A minimal JSON value for the documents redlock prints (`status --json`, `acquire --json`).
//! Field order is kept as written, so the output is stable and diffable.

use crate::report::log::json_str;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(i128),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    pub fn opt_str(s: Option<&str>) -> Json {
        s.map_or(Json::Null, Json::str)
    }

    pub fn opt_num(n: Option<i64>) -> Json {
        n.map_or(Json::Null, |n| Json::Num(n.into()))
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => out.push_str(&n.to_string()),
            Json::Str(s) => json_str(out, s),
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_str(out, name);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_render_compactly_in_field_order() {
        let doc = Json::Obj(vec![
            ("b", Json::Num(-2)),
            (
                "a",
                Json::Arr(vec![Json::Null, Json::Bool(true), Json::str("x\"y")]),
            ),
        ]);
        assert_eq!(doc.render(), r#"{"b":-2,"a":[null,true,"x\"y"]}"#);
    }
}
