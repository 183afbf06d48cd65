//! IR identity up to where it was built: clang records the directory it
//! ran in (`!DIFile(..., directory: "...")`), so two build directories of
//! one source tree (a Debug and a Release build) make IR that differs in
//! those fields only. The daemon shares one search between such builds
//! (docs/daemon.md, "Build directories of one project share a search").

use super::content_hash;

/// The IR's content hash with every metadata node's `directory:` field
/// left out; everything else (code, file names, lines) counts.
pub fn hash_without_build_directories(ir_text: &str) -> String {
    content_hash(without_directories(ir_text).as_bytes())
}

/// The IR text with the `directory: "..."` fields of its metadata lines
/// removed.
fn without_directories(ir: &str) -> String {
    const FIELD: &str = "directory: \"";
    let mut out = String::with_capacity(ir.len());
    for line in ir.split_inclusive('\n') {
        if !line.starts_with('!') {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find(FIELD) {
            out.push_str(&rest[..at]);
            let value = &rest[at + FIELD.len()..];
            // The value ends at the first quote: LLVM writes a quote inside
            // a string as `\22`.
            let end = value.find('"').map_or(value.len(), |e| e + 1);
            rest = &value[end..];
        }
        out.push_str(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_directories_of_debug_info_do_not_count() {
        let ir = |file: &str, dir: &str| {
            format!(
                "@s = constant [22 x i8] c\"directory: \\22/x\\22 kept\\00\"\n\
                 !1 = !DIFile(filename: \"{file}\", directory: \"{dir}\")\n!2 = !{{}}\n"
            )
        };
        let debug = ir("/src/k.cu", "/b/debug");
        assert_eq!(
            without_directories(&debug),
            ir("/src/k.cu", "").replace(", directory: \"\")", ", )")
        );
        assert_eq!(
            hash_without_build_directories(&debug),
            hash_without_build_directories(&ir("/src/k.cu", "/b/release \\22quoted\\22"))
        );
        // Another file, or other code, is other IR.
        assert_ne!(
            hash_without_build_directories(&debug),
            hash_without_build_directories(&ir("/src/other.cu", "/b/debug"))
        );
        assert_ne!(
            hash_without_build_directories(&debug),
            hash_without_build_directories(&debug.replace("kept", "gone"))
        );
    }
}
