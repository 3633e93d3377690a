//! Confining a file a model names to the model's own folder: the one check every reader of a
//! model-relative path goes through (external tensor data today).
//!
//! A model is untrusted input: its `location` strings must not reach files outside its folder,
//! neither by an absolute path or `..`, nor through a symbolic link, nor by naming a device or a
//! FIFO (which would block the reader).

use std::path::{Component, Path, PathBuf};

/// The real path of `relative` inside `base`, or why it is refused. `relative` must be a plain
/// relative path; once every symbolic link is resolved it must still lie inside `base`'s real
/// path and be a regular file.
pub fn confined_file(base: &Path, relative: &str) -> Result<PathBuf, String> {
    let rel = Path::new(relative);
    if relative.is_empty()
        || rel.is_absolute()
        || rel.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!("location `{relative}` must be a relative path inside the model's directory"));
    }
    // A model opened as `model.onnx` has the empty path as its folder.
    let base = if base.as_os_str().is_empty() { Path::new(".") } else { base };
    let real_base =
        base.canonicalize().map_err(|e| format!("cannot resolve the model's directory `{}`: {e}", base.display()))?;
    let joined = base.join(rel);
    let real = joined.canonicalize().map_err(|e| format!("cannot open `{}`: {e}", joined.display()))?;
    if !real.starts_with(&real_base) {
        return Err(format!(
            "location `{relative}` leads to `{}` (through a symbolic link), outside the model's directory `{}`: \
             copy the data file into the model's directory",
            real.display(),
            real_base.display()
        ));
    }
    let meta = std::fs::metadata(&real).map_err(|e| format!("cannot open `{}`: {e}", real.display()))?;
    if !meta.is_file() {
        return Err(format!("location `{relative}` is not a regular file"));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::confined_file;

    #[test]
    fn symlinks_out_of_the_folder_and_special_files_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("weights.bin"), b"w").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/inner.bin"), b"w").unwrap();
        assert!(confined_file(dir.path(), "weights.bin").is_ok());
        assert!(confined_file(dir.path(), "sub/inner.bin").is_ok());
        for bad in ["", "/etc/passwd", "../x", "sub/../../x"] {
            let e = confined_file(dir.path(), bad).unwrap_err();
            assert!(e.contains("relative path inside"), "{bad}: {e}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&secret, dir.path().join("link.bin")).unwrap();
            let e = confined_file(dir.path(), "link.bin").unwrap_err();
            assert!(e.contains("outside the model's directory"), "{e}");
            std::os::unix::fs::symlink(outside.path(), dir.path().join("linkdir")).unwrap();
            let e = confined_file(dir.path(), "linkdir/secret").unwrap_err();
            assert!(e.contains("outside the model's directory"), "{e}");
            // A link that stays inside is a legitimate layout.
            std::os::unix::fs::symlink(dir.path().join("weights.bin"), dir.path().join("alias.bin")).unwrap();
            assert!(confined_file(dir.path(), "alias.bin").is_ok());
            let e = confined_file(dir.path(), "sub").unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
        }
    }
}
