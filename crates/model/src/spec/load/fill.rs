//! A buffer's `fill`: generated contents (uniform, normal, int_range, iota,
//! constant) checked against the element type, and data files (raw or `.npy`).

use super::read::{array, integer, nonempty_string, number, quote_list, Cx, Res};
use crate::spec::model::{ElemType, Fill, Number};
use crate::spec::npy;
use crate::spec::tree::{Node, Value};
use std::ops::Range;
use std::sync::Arc;

pub(super) const FILL_KINDS: &[&str] =
    &["uniform", "normal", "int_range", "iota", "constant", "file"];

fn pair(cx: &Cx, node: &Node, field: &str, what: &str) -> Res<[Number; 2]> {
    let items = array(cx, node, field, what)?;
    if items.len() != 2 {
        return Err(cx.err(
            &node.span,
            field,
            format!("expected {what}, found {} entries", items.len()),
        ));
    }
    Ok([
        number(cx, &items[0], &format!("{field}[0]"))?,
        number(cx, &items[1], &format!("{field}[1]"))?,
    ])
}

/// Checks that an integer fits the element type (any integer fits a float type).
fn check_fits(cx: &Cx, span: &Range<usize>, field: &str, v: i64, elem: ElemType) -> Res<()> {
    if let Some((lo, hi)) = elem.int_range() {
        if (v as i128) < lo || (v as i128) > hi {
            return Err(cx.err(
                span,
                field,
                format!("{v} does not fit in {elem} ({lo} to {hi})"),
            ));
        }
    }
    Ok(())
}

pub(super) fn read_fill(cx: &Cx, node: &Node, field: &str, elem: ElemType) -> Res<Fill> {
    let expected = format!("expected one of {}", quote_list(FILL_KINDS));
    let entry = match &node.value {
        Value::Str(s) if s == "iota" => {
            return Ok(Fill::Iota {
                start: Number::Int(0),
            })
        }
        Value::Table(entries) if entries.len() == 1 => &entries[0],
        Value::Table(entries) if entries.len() > 1 => {
            let keys: Vec<String> = entries.iter().map(|e| format!("`{}`", e.key)).collect();
            return Err(cx.err(
                &node.span,
                field,
                format!(
                    "expected exactly one of {}, found {}",
                    quote_list(FILL_KINDS),
                    keys.join(" and ")
                ),
            ));
        }
        _ => {
            return Err(cx.err(
                &node.span,
                field,
                format!("{expected} (e.g. fill = {{ uniform = [-1.0, 1.0] }})"),
            ))
        }
    };
    let sub = format!("{field}.{}", entry.key);
    let n = &entry.node;
    let float_only = |kind: &str| -> Res<()> {
        if elem.is_float() {
            Ok(())
        } else {
            Err(cx.err(
                &n.span,
                &sub,
                format!(
                    "{kind} needs a float buffer, this one is {elem}; use int_range for integers"
                ),
            ))
        }
    };
    Ok(match entry.key.as_str() {
        "uniform" => {
            float_only("uniform")?;
            let [lo, hi] = pair(cx, n, &sub, "a pair [lo, hi]")?;
            let (lo, hi) = (lo.as_f64(), hi.as_f64());
            if lo > hi {
                return Err(cx.err(&n.span, &sub, format!("lo ({lo}) > hi ({hi})")));
            }
            Fill::Uniform { lo, hi }
        }
        "normal" => {
            float_only("normal")?;
            let [mean, stddev] = pair(cx, n, &sub, "a pair [mean, stddev]")?;
            let (mean, stddev) = (mean.as_f64(), stddev.as_f64());
            if stddev < 0.0 {
                return Err(cx.err(
                    &n.span,
                    &sub,
                    format!("stddev must be >= 0, found {stddev}"),
                ));
            }
            Fill::Normal { mean, stddev }
        }
        "int_range" => read_int_range(cx, n, &sub, elem)?,
        "iota" | "constant" => read_scalar_fill(cx, n, &sub, elem, entry.key == "iota")?,
        "file" => read_file_fill(cx, n, &sub, elem)?,
        other => {
            return Err(cx.err(
                &entry.key_span,
                field,
                format!("{expected}, found `{other}`"),
            ))
        }
    })
}

/// Reads `int_range = [lo, hi]`, both ends fitting the element type.
fn read_int_range(cx: &Cx, n: &Node, sub: &str, elem: ElemType) -> Res<Fill> {
    let items = array(cx, n, sub, "a pair of integers [lo, hi]")?;
    if items.len() != 2 {
        return Err(cx.err(
            &n.span,
            sub,
            format!(
                "expected a pair of integers [lo, hi], found {} entries",
                items.len()
            ),
        ));
    }
    let lo = integer(cx, &items[0], &format!("{sub}[0]"))?;
    let hi = integer(cx, &items[1], &format!("{sub}[1]"))?;
    if lo > hi {
        return Err(cx.err(&n.span, sub, format!("lo ({lo}) > hi ({hi})")));
    }
    check_fits(cx, &items[0].span, &format!("{sub}[0]"), lo, elem)?;
    check_fits(cx, &items[1].span, &format!("{sub}[1]"), hi, elem)?;
    Ok(Fill::IntRange { lo, hi })
}

/// Reads `iota = start` or `constant = v`: an integer that fits for an
/// integer buffer, any number for a float one.
fn read_scalar_fill(cx: &Cx, n: &Node, sub: &str, elem: ElemType, iota: bool) -> Res<Fill> {
    let v = number(cx, n, sub)?;
    if !elem.is_float() {
        match v {
            Number::Int(i) => check_fits(cx, &n.span, sub, i, elem)?,
            Number::Float(f) => {
                return Err(cx.err(
                    &n.span,
                    sub,
                    format!("expected an integer for a {elem} buffer, found {f}"),
                ))
            }
        }
    }
    Ok(if iota {
        Fill::Iota { start: v }
    } else {
        Fill::Constant(v)
    })
}

fn read_file_fill(cx: &Cx, node: &Node, field: &str, elem: ElemType) -> Res<Fill> {
    let rel = nonempty_string(cx, node, field)?;
    let path = cx.resolve(&rel);
    let err = |m: String| cx.err(&node.span, field, m);
    let bytes = cx
        .reader
        .read(&path)
        .map_err(|e| err(format!("data file {e}")))?;
    let size = elem.size();
    let is_npy = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    let (data, elems) = if is_npy {
        let h = npy::parse_header(&bytes).map_err(|m| err(format!("{}: {m}", path.display())))?;
        if !npy::descr_matches(&h.descr, elem) {
            return Err(err(format!(
                "{} has dtype '{}', expected '{}' for a {elem} buffer (little-endian)",
                path.display(),
                h.descr,
                elem.npy_descr()
            )));
        }
        let elems = h.elems().ok_or_else(|| {
            err(format!(
                "{}: shape {:?} is too large",
                path.display(),
                h.shape
            ))
        })?;
        if h.fortran_order && h.shape.iter().filter(|&&d| d > 1).count() > 1 {
            return Err(err(format!(
                "{} is in Fortran order; only C order is supported",
                path.display()
            )));
        }
        let payload = &bytes[h.data_offset..];
        if payload.len() as u128 != elems as u128 * size as u128 {
            return Err(err(format!(
                "{} has {} data bytes, shape {:?} of '{}' needs {}",
                path.display(),
                payload.len(),
                h.shape,
                h.descr,
                elems as u128 * size as u128
            )));
        }
        (payload.to_vec(), elems)
    } else {
        if bytes.len() % size != 0 {
            return Err(err(format!(
                "{} has {} bytes, not a whole number of {elem} elements ({size} bytes each)",
                path.display(),
                bytes.len()
            )));
        }
        let elems = bytes.len() / size;
        (bytes, elems)
    };
    Ok(Fill::File {
        path,
        data: Arc::new(data),
        elems,
    })
}
