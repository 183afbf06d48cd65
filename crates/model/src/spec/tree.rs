//! The spec's TOML as a tree in which every value and every key keeps its
//! byte span, so that validation errors can name a line.
//!
//! `toml::Spanned<T>` gives spans only where the type asks for them, and it
//! fails on values the parser has no span for (implicit tables). This module
//! asks for a span at every node through the same serde protocol
//! (`deserialize_struct` with `Spanned`'s private names, learnt at run time
//! from `toml::Spanned` itself) and accepts values that come without one.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

/// A TOML value with its span (byte range in the spec text).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) span: Range<usize>,
}

#[derive(Debug, Clone)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool,
    Datetime,
    Array(Vec<Node>),
    Table(Vec<Entry>),
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_span: Range<usize>,
    pub(crate) node: Node,
}

impl Value {
    /// The TOML type name, for "expected X, found Y" messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool => "a boolean",
            Value::Datetime => "a datetime",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
}

/// Parses TOML text into a [`Node`] tree. A syntax error comes back with the
/// parser's message and the byte offset it points at.
pub(crate) fn parse(text: &str) -> Result<Node, (String, usize)> {
    let de = toml::Deserializer::new(text);
    match (NodeSeed { spanned: true }).deserialize(de) {
        Ok(raw) => Ok(raw.finish(0..0)),
        Err(e) => {
            let offset = e.span().map_or(0, |s| s.start);
            Err((e.message().trim().to_string(), offset))
        }
    }
}

struct SpannedNames {
    name: &'static str,
    start: &'static str,
    end: &'static str,
    value: &'static str,
    fields: &'static [&'static str],
}

/// The private struct and field names `toml::Spanned` asks the deserializer
/// for, captured by deserializing one from a deserializer that records them.
fn spanned_names() -> &'static SpannedNames {
    static NAMES: OnceLock<SpannedNames> = OnceLock::new();
    NAMES.get_or_init(|| {
        let cell = Cell::new(None);
        let _ = <toml::Spanned<String> as serde::Deserialize>::deserialize(Capture(&cell));
        let (name, fields) = cell
            .get()
            .expect("toml::Spanned deserializes through deserialize_struct");
        assert_eq!(
            fields.len(),
            3,
            "toml::Spanned has start, end and value fields"
        );
        SpannedNames {
            name,
            start: fields[0],
            end: fields[1],
            value: fields[2],
            fields,
        }
    })
}

type Captured = Option<(&'static str, &'static [&'static str])>;

struct Capture<'a>(&'a Cell<Captured>);

#[derive(Debug)]
struct Captured_;

impl fmt::Display for Captured_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("captured")
    }
}

impl std::error::Error for Captured_ {}

impl de::Error for Captured_ {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Captured_
    }
}

impl<'de> Deserializer<'de> for Capture<'_> {
    type Error = Captured_;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Captured_> {
        Err(Captured_)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Captured_> {
        self.0.set(Some((name, fields)));
        Err(Captured_)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// A node as it comes out of serde: the span may be missing.
struct Raw {
    value: RawValue,
    span: Option<Range<usize>>,
}

enum RawValue {
    Str(String),
    Int(i64),
    Float(f64),
    Bool,
    Datetime,
    Array(Vec<Raw>),
    Table(Vec<(RawKey, Raw)>),
}

struct RawKey {
    key: String,
    span: Option<Range<usize>>,
}

impl Raw {
    /// Gives every node a span: its own, else its parent's.
    fn finish(self, parent: Range<usize>) -> Node {
        let span = self.span.unwrap_or(parent);
        let value = match self.value {
            RawValue::Str(s) => Value::Str(s),
            RawValue::Int(i) => Value::Int(i),
            RawValue::Float(f) => Value::Float(f),
            RawValue::Bool => Value::Bool,
            RawValue::Datetime => Value::Datetime,
            RawValue::Array(items) => {
                Value::Array(items.into_iter().map(|r| r.finish(span.clone())).collect())
            }
            RawValue::Table(entries) => Value::Table(
                entries
                    .into_iter()
                    .map(|(k, v)| {
                        let key_span = k.span.or_else(|| v.span.clone()).unwrap_or(span.clone());
                        let node = v.finish(key_span.clone());
                        Entry {
                            key: k.key,
                            key_span,
                            node,
                        }
                    })
                    .collect(),
            ),
        };
        Node { value, span }
    }
}

/// Deserializes a [`Raw`]; `spanned` asks the deserializer for the span
/// first (not done for the value inside a span wrapper, which would recurse).
#[derive(Clone, Copy)]
struct NodeSeed {
    spanned: bool,
}

impl<'de> DeserializeSeed<'de> for NodeSeed {
    type Value = Raw;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Raw, D::Error> {
        if self.spanned {
            let n = spanned_names();
            de.deserialize_struct(n.name, n.fields, NodeVisitor)
        } else {
            de.deserialize_any(NodeVisitor)
        }
    }
}

fn raw(value: RawValue) -> Raw {
    Raw { value, span: None }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E: de::Error>(self, _v: bool) -> Result<Raw, E> {
        Ok(raw(RawValue::Bool))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(raw(RawValue::Int(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        match i64::try_from(v) {
            Ok(i) => Ok(raw(RawValue::Int(i))),
            Err(_) => Err(E::custom(format!("integer {v} is out of range"))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Raw, E> {
        Ok(raw(RawValue::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(raw(RawValue::Str(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(raw(RawValue::Str(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(NodeSeed { spanned: true })? {
            items.push(item);
        }
        Ok(raw(RawValue::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let names = spanned_names();
        let Some(first) = map.next_key_seed(KeySeed)? else {
            return Ok(raw(RawValue::Table(Vec::new())));
        };
        if first.key == names.start {
            // The span wrapper: start, end, then the value itself.
            let start: usize = map.next_value()?;
            let mut end = start;
            let mut value = None;
            while let Some(k) = map.next_key_seed(KeySeed)? {
                if k.key == names.end {
                    end = map.next_value()?;
                } else if k.key == names.value {
                    value = Some(map.next_value_seed(NodeSeed { spanned: false })?);
                } else {
                    return Err(de::Error::custom(format!(
                        "unexpected span field {}",
                        k.key
                    )));
                }
            }
            let mut value = value.ok_or_else(|| de::Error::custom("span without a value"))?;
            value.span = Some(start..end);
            return Ok(value);
        }
        if first.key.starts_with("$__toml_private_datetime") {
            let _text: String = map.next_value()?;
            return Ok(raw(RawValue::Datetime));
        }
        let mut entries = Vec::new();
        let value = map.next_value_seed(NodeSeed { spanned: true })?;
        entries.push((first, value));
        while let Some(k) = map.next_key_seed(KeySeed)? {
            let value = map.next_value_seed(NodeSeed { spanned: true })?;
            entries.push((k, value));
        }
        Ok(raw(RawValue::Table(entries)))
    }
}

/// Deserializes a table key, with its span where the deserializer has one.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = RawKey;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<RawKey, D::Error> {
        let n = spanned_names();
        de.deserialize_struct(n.name, n.fields, KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = RawKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawKey, E> {
        Ok(RawKey {
            key: v.to_string(),
            span: None,
        })
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<RawKey, E> {
        Ok(RawKey { key: v, span: None })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawKey, A::Error> {
        let names = spanned_names();
        let (mut start, mut end, mut key) = (None, None, None);
        while let Some(k) = map.next_key::<String>()? {
            if k == names.start {
                start = Some(map.next_value::<usize>()?);
            } else if k == names.end {
                end = Some(map.next_value::<usize>()?);
            } else if k == names.value {
                key = Some(map.next_value::<String>()?);
            } else {
                return Err(de::Error::custom(format!("unexpected key field {k}")));
            }
        }
        let key = key.ok_or_else(|| de::Error::custom("key without a name"))?;
        let span = match (start, end) {
            (Some(s), Some(e)) => Some(s..e),
            (Some(s), None) => Some(s..s),
            _ => None,
        };
        Ok(RawKey { key, span })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(node: &'a Node, key: &str) -> &'a Node {
        match &node.value {
            Value::Table(entries) => &entries.iter().find(|e| e.key == key).unwrap().node,
            _ => panic!("not a table"),
        }
    }

    #[test]
    fn spans_of_values_and_keys() {
        let text = "a = 1\n[t]\nb = \"x\"\nc = [1, 2.5]\nd = { e = true }\n[[arr]]\nf = 3\n";
        let root = parse(text).unwrap();
        let a = lookup(&root, "a");
        assert!(matches!(a.value, Value::Int(1)));
        assert_eq!(&text[a.span.clone()], "1");
        let t = lookup(&root, "t");
        let b = lookup(t, "b");
        assert_eq!(&text[b.span.clone()], "\"x\"");
        let c = lookup(t, "c");
        let Value::Array(items) = &c.value else {
            panic!()
        };
        assert_eq!(&text[items[1].span.clone()], "2.5");
        let d = lookup(t, "d");
        let Value::Table(entries) = &d.value else {
            panic!()
        };
        assert_eq!(&text[entries[0].key_span.clone()], "e");
        let arr = lookup(&root, "arr");
        let Value::Array(tables) = &arr.value else {
            panic!()
        };
        let f = lookup(&tables[0], "f");
        assert_eq!(&text[f.span.clone()], "3");
    }

    #[test]
    fn implicit_tables_and_datetimes() {
        let text = "x.y.z = 1\nwhen = 1979-05-27\n";
        let root = parse(text).unwrap();
        let z = lookup(lookup(lookup(&root, "x"), "y"), "z");
        assert_eq!(&text[z.span.clone()], "1");
        assert!(matches!(lookup(&root, "when").value, Value::Datetime));
    }

    #[test]
    fn syntax_error_has_offset() {
        let (msg, offset) = parse("a = 1\nb = \n").unwrap_err();
        assert!(!msg.is_empty());
        assert!(offset >= 6, "{offset}");
    }
}
