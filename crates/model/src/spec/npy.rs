//! Reading `.npy` files (NumPy format versions 1.0, 2.0 and 3.0).

use super::model::ElemType;

/// A parsed `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Npy {
    /// The dtype string, e.g. `<f4`.
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Byte offset of the element data.
    pub data_offset: usize,
}

impl Npy {
    /// Number of elements (the product of the shape; 1 for a 0-d array).
    pub fn elems(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// Parses the header of a `.npy` file.
pub fn parse_header(bytes: &[u8]) -> Result<Npy, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("truncated .npy header".into());
            }
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (len as usize, 12)
        }
        _ => {
            return Err(format!(
                ".npy version {major}.{minor} is not supported (1.0, 2.0, 3.0 are)"
            ))
        }
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(&bytes[start..end]).map_err(|_| ".npy header is not text")?;
    let dict = parse_dict(header)?;
    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (key, value) in dict {
        match (key.as_str(), value) {
            ("descr", PyValue::Str(s)) => descr = Some(s),
            ("fortran_order", PyValue::Bool(b)) => fortran_order = Some(b),
            ("shape", PyValue::Tuple(t)) => shape = Some(t),
            ("descr" | "fortran_order" | "shape", _) => {
                return Err(format!(".npy header: `{key}` has the wrong type"))
            }
            _ => {}
        }
    }
    Ok(Npy {
        descr: descr.ok_or(".npy header has no `descr`")?,
        fortran_order: fortran_order.ok_or(".npy header has no `fortran_order`")?,
        shape: shape.ok_or(".npy header has no `shape`")?,
        data_offset: end,
    })
}

/// Whether a dtype string names `elem` in little-endian (or, for one-byte
/// types, any) byte order.
pub fn descr_matches(descr: &str, elem: ElemType) -> bool {
    let want = elem.npy_descr();
    if descr == want {
        return true;
    }
    if elem.size() == 1 {
        // Byte order does not matter for one byte: '|u1', '<u1', '=u1', '>u1'.
        return descr.len() == 3 && "|<>=".contains(&descr[..1]) && descr[1..] == want[1..];
    }
    false
}

enum PyValue {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// Parses the Python dict literal of a `.npy` header.
fn parse_dict(text: &str) -> Result<Vec<(String, PyValue)>, String> {
    let mut p = Cursor {
        s: text.trim().as_bytes(),
        i: 0,
    };
    let bad = |what: &str| format!(".npy header is not a Python dict literal ({what})");
    p.expect(b'{').map_err(|_| bad("no `{`"))?;
    let mut out = Vec::new();
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string().ok_or_else(|| bad("expected a quoted key"))?;
        p.skip_ws();
        p.expect(b':').map_err(|_| bad("expected `:`"))?;
        p.skip_ws();
        let value = if let Some(s) = p.string() {
            PyValue::Str(s)
        } else if p.word(b"True") {
            PyValue::Bool(true)
        } else if p.word(b"False") {
            PyValue::Bool(false)
        } else if p.eat(b'(') {
            let mut dims = Vec::new();
            loop {
                p.skip_ws();
                if p.eat(b')') {
                    break;
                }
                let d = p.integer().ok_or_else(|| bad("bad shape"))?;
                dims.push(d);
                p.skip_ws();
                if !p.eat(b',') {
                    p.skip_ws();
                    p.expect(b')').map_err(|_| bad("bad shape"))?;
                    break;
                }
            }
            PyValue::Tuple(dims)
        } else {
            return Err(bad(&format!("unexpected value for `{key}`")));
        };
        out.push((key, value));
        p.skip_ws();
        if !p.eat(b',') {
            p.skip_ws();
            p.expect(b'}').map_err(|_| bad("expected `,` or `}`"))?;
            break;
        }
    }
    Ok(out)
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), ()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(())
        }
    }

    fn word(&mut self, w: &[u8]) -> bool {
        if self.s[self.i..].starts_with(w) {
            self.i += w.len();
            true
        } else {
            false
        }
    }

    fn string(&mut self) -> Option<String> {
        let quote = *self.s.get(self.i)?;
        if quote != b'\'' && quote != b'"' {
            return None;
        }
        let start = self.i + 1;
        let len = self.s[start..].iter().position(|&c| c == quote)?;
        self.i = start + len + 1;
        String::from_utf8(self.s[start..start + len].to_vec()).ok()
    }

    fn integer(&mut self) -> Option<usize> {
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        // numpy on some platforms wrote Python 2 longs: `(3L,)`.
        let n = std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok();
        self.eat(b'L');
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(version: u8, header: &str) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(version);
        out.push(0);
        if version == 1 {
            out.extend((header.len() as u16).to_le_bytes());
        } else {
            out.extend((header.len() as u32).to_le_bytes());
        }
        out.extend(header.as_bytes());
        out
    }

    #[test]
    fn headers() {
        let h = parse_header(&npy(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n",
        ))
        .unwrap();
        assert_eq!(h.descr, "<f4");
        assert_eq!(h.shape, vec![3, 4]);
        assert_eq!(h.elems(), Some(12));
        assert!(!h.fortran_order);
        let header = "{\"descr\": \"|u1\", \"fortran_order\": True, \"shape\": (5,)}";
        let h = parse_header(&npy(2, header)).unwrap();
        assert_eq!(h.shape, vec![5]);
        assert!(h.fortran_order);
        assert_eq!(h.data_offset, 12 + header.len());
        let h = parse_header(&npy(
            1,
            "{'descr': '<i8', 'fortran_order': False, 'shape': ()}",
        ))
        .unwrap();
        assert_eq!(h.elems(), Some(1));
        assert!(parse_header(b"hello world").is_err());
        assert!(parse_header(&npy(1, "{'descr': '<f4'}")).is_err());
        assert!(parse_header(&npy(4, "{}")).is_err());
    }

    #[test]
    fn dtypes() {
        assert!(descr_matches("<f4", ElemType::F32));
        assert!(!descr_matches(">f4", ElemType::F32));
        assert!(!descr_matches("<f8", ElemType::F32));
        assert!(descr_matches("|u1", ElemType::U8));
        assert!(descr_matches("<i1", ElemType::I8));
        assert!(!descr_matches("|u1", ElemType::I8));
    }
}
