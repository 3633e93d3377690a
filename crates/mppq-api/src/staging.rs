//! A run's output files, all or none: they are written into a hidden staging directory inside the
//! output directory and moved into place only once the whole run has succeeded. A run that fails
//! (or is killed) before that leaves the output directory as it was, apart from a
//! `.mppq-staging-*` directory, which the next run there removes. No output may replace one of
//! the run's inputs: the names of the usual outputs are checked before any work, every name
//! again before the move.

use crate::error::{ApiError, Result};
use std::path::{Path, PathBuf};

const PREFIX: &str = ".mppq-staging-";
/// The file in a staging directory that names the process writing it.
const OWNER: &str = ".owner-pid";

/// The file names `mppq quantize` writes with its default exporters and reports.
pub const USUAL_OUTPUTS: &[&str] = &["model.qdq.onnx", "quant.json", "model.float.onnx", "report.html", "report.json"];

/// The staging directory of one run.
pub struct Staging {
    out_dir: PathBuf,
    dir: tempfile::TempDir,
    inputs: Vec<PathBuf>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ApiError + '_ {
    move |source| ApiError::Io { path: path.display().to_string(), source }
}

impl Staging {
    /// Creates `out_dir` if needed and a staging directory in it, after checking that none of
    /// [`USUAL_OUTPUTS`] in `out_dir` is one of `inputs` (the model, a calibration file, …).
    /// Staging directories left by runs that were killed are removed.
    pub fn new(out_dir: &Path, inputs: &[&Path]) -> Result<Self> {
        let inputs: Vec<PathBuf> = inputs.iter().filter_map(|p| p.canonicalize().ok()).collect();
        std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
        let staging = Self {
            out_dir: out_dir.to_path_buf(),
            dir: tempfile::Builder::new().prefix(PREFIX).tempdir_in(out_dir).map_err(io(out_dir))?,
            inputs,
        };
        let owner = staging.dir.path().join(OWNER);
        std::fs::write(&owner, std::process::id().to_string()).map_err(io(&owner))?;
        for name in USUAL_OUTPUTS {
            staging.check_destination(&out_dir.join(name))?;
        }
        staging.remove_stale();
        Ok(staging)
    }

    /// Where the run writes its files.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn check_destination(&self, dest: &Path) -> Result<()> {
        if let Ok(dest) = dest.canonicalize()
            && self.inputs.contains(&dest)
        {
            return Err(ApiError::data(
                &dest,
                "an output of this run would replace this input; write into another directory (-o)",
            ));
        }
        Ok(())
    }

    /// Staging directories of earlier runs whose process is gone (where `/proc` tells), or
    /// older than a day; a run still going is not touched.
    fn remove_stale(&self) {
        let Ok(entries) = std::fs::read_dir(&self.out_dir) else { return };
        let day = std::time::Duration::from_secs(24 * 3600);
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_name().to_string_lossy().starts_with(PREFIX) || path == self.dir.path() {
                continue;
            }
            let owner_gone = std::fs::read_to_string(path.join(OWNER))
                .ok()
                .filter(|_| Path::new("/proc/self").exists())
                .is_some_and(|pid| !Path::new("/proc").join(pid.trim()).exists());
            let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|a| a > day));
            if owner_gone || old {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    /// Moves `files` (paths inside the staging directory) into the output directory and returns
    /// their new paths; the files get the permissions a plain file creation gives (the umask's).
    pub fn commit(self, files: Vec<(String, PathBuf)>) -> Result<Vec<(String, PathBuf)>> {
        let mut moves = Vec::with_capacity(files.len());
        for (what, path) in files {
            let relative = path.strip_prefix(self.dir.path()).unwrap_or(&path).to_path_buf();
            let dest = self.out_dir.join(&relative);
            self.check_destination(&dest)?;
            moves.push((what, path, dest));
        }
        let mode = creation_mode(self.dir.path());
        let mut moved = Vec::with_capacity(moves.len());
        for (what, from, dest) in moves {
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            if let Some(mode) = &mode {
                std::fs::set_permissions(&from, mode.clone()).map_err(io(&from))?;
            }
            std::fs::rename(&from, &dest).map_err(io(&dest))?;
            moved.push((what, dest));
        }
        Ok(moved)
    }
}

/// The permissions a new file gets in `dir` (0666 less the umask on Unix): temporary files are
/// created 0600, which would hide the outputs from the user's group.
fn creation_mode(dir: &Path) -> Option<std::fs::Permissions> {
    let probe = dir.join(".mppq-mode-probe");
    let mode = std::fs::File::create(&probe).and_then(|f| f.metadata()).map(|m| m.permissions()).ok();
    let _ = std::fs::remove_file(&probe);
    mode
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_that_would_replace_the_input_model_are_refused_before_any_work() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model.float.onnx");
        std::fs::write(&model, b"the user's model").unwrap();
        let msg = Staging::new(dir.path(), &[&model]).err().unwrap().to_string();
        assert!(msg.contains("model.float.onnx") && msg.contains("another directory"), "{msg}");
        assert_eq!(std::fs::read(&model).unwrap(), b"the user's model");
    }

    #[test]
    fn files_appear_only_on_commit_and_a_dropped_run_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let staging = Staging::new(&out, &[]).unwrap();
        let file = staging.path().join("quant.json");
        std::fs::write(&file, b"{}").unwrap();
        assert!(!out.join("quant.json").exists());
        let moved = staging.commit(vec![("quant JSON".into(), file)]).unwrap();
        assert_eq!(moved, vec![("quant JSON".to_string(), out.join("quant.json"))]);
        assert_eq!(std::fs::read(out.join("quant.json")).unwrap(), b"{}");

        let failed = Staging::new(&out, &[]).unwrap();
        std::fs::write(failed.path().join("model.qdq.onnx"), b"half").unwrap();
        drop(failed); // the run failed
        // A killed run's staging directory (its process gone) is removed by the next run.
        let killed = out.join(".mppq-staging-killed");
        std::fs::create_dir_all(&killed).unwrap();
        std::fs::write(killed.join(OWNER), "4294967295").unwrap();
        std::fs::write(killed.join("model.qdq.onnx"), b"half").unwrap();
        drop(Staging::new(&out, &[]).unwrap());
        #[cfg(target_os = "linux")]
        assert!(!killed.exists());
        let _ = std::fs::remove_dir_all(&killed);
        let left: Vec<String> =
            std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left, vec!["quant.json".to_string()]);
    }

    #[cfg(unix)]
    #[test]
    fn committed_files_have_the_permissions_of_a_plain_file_creation() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"").unwrap();
        let expected = std::fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
        let staging = Staging::new(&dir.path().join("out"), &[]).unwrap();
        let file = tempfile::NamedTempFile::new_in(staging.path()).unwrap().into_temp_path().keep().unwrap();
        let moved = staging.commit(vec![("x".into(), file)]).unwrap();
        assert_eq!(std::fs::metadata(&moved[0].1).unwrap().permissions().mode() & 0o777, expected);
    }
}
