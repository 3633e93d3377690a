//! A run's output files, all or none: they are written into a hidden staging directory inside the
//! output directory and moved into place only once the whole run has succeeded. A run that fails
//! (or is killed) before that leaves the output directory as it was, apart from a
//! `.mppq-staging-*` directory, which the next run there removes; a directory the run created
//! is removed again. No output may replace one of the run's inputs: the names of the usual
//! outputs are checked before any work, every name again before the move.
//!
//! One run at a time per directory: a run holds an exclusive lock on the output directory
//! (`flock`, released by the kernel when the process ends, however it ends); a second run there
//! is refused. The move itself is several renames, so it is bracketed: [`INCOMPLETE`] is written
//! before the first and removed after [`MANIFEST`] (the list of the run's files) is written
//! last. A run killed in between leaves the marker, and readers of our outputs
//! ([`check_complete`]) refuse a directory that has it: its files may come from two runs.

use crate::error::{ApiError, Result};
use std::path::{Path, PathBuf};

const PREFIX: &str = ".mppq-staging-";
/// The file in a staging directory that names the process writing it.
const OWNER: &str = ".owner-pid";

/// Present while a run moves its files into place (its content: the run's process id).
pub const INCOMPLETE: &str = ".mppq-incomplete";
/// Written last: the files of the run that wrote the directory, one per line.
pub const MANIFEST: &str = ".mppq-manifest";

/// The file names `mppq quantize` writes with its default exporters and reports.
pub const USUAL_OUTPUTS: &[&str] = &["model.qdq.onnx", "quant.json", "model.float.onnx", "report.html", "report.json"];

/// The staging directory of one run.
pub struct Staging {
    out_dir: PathBuf,
    /// `None` once dropped (before the output directory itself may be removed).
    dir: Option<tempfile::TempDir>,
    inputs: Vec<PathBuf>,
    /// The output directory, opened and locked for the run's duration.
    _lock: std::fs::File,
    /// The run created the output directory: a failed run removes it again.
    created: bool,
    committed: bool,
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
        let created = !out_dir.exists();
        std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
        let lock = std::fs::File::open(out_dir).map_err(io(out_dir))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ApiError::data(
                    out_dir,
                    "another mppq run is writing into this directory: wait for it to finish, or write into another \
                     directory (-o)",
                ));
            }
            // A filesystem without locks (some network mounts): the run goes on unlocked; the
            // bracketed move still lets readers see an interrupted one.
            Err(std::fs::TryLockError::Error(_)) => {}
        }
        let mut staging =
            Self { out_dir: out_dir.to_path_buf(), dir: None, inputs, _lock: lock, created, committed: false };
        staging.dir = Some(tempfile::Builder::new().prefix(PREFIX).tempdir_in(out_dir).map_err(io(out_dir))?);
        let owner = staging.path().join(OWNER);
        std::fs::write(&owner, std::process::id().to_string()).map_err(io(&owner))?;
        for name in USUAL_OUTPUTS {
            staging.check_destination(&out_dir.join(name))?;
        }
        staging.remove_stale();
        Ok(staging)
    }

    /// Where the run writes its files.
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(self.out_dir.as_path(), tempfile::TempDir::path)
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
            if !entry.file_name().to_string_lossy().starts_with(PREFIX) || path == self.path() {
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
    pub fn commit(mut self, files: Vec<(String, PathBuf)>) -> Result<Vec<(String, PathBuf)>> {
        let mut moves = Vec::with_capacity(files.len());
        for (what, path) in files {
            let relative = path.strip_prefix(self.path()).unwrap_or(&path).to_path_buf();
            let dest = self.out_dir.join(&relative);
            self.check_destination(&dest)?;
            moves.push((what, path, dest));
        }
        let mode = creation_mode(self.path());
        let marker = self.out_dir.join(INCOMPLETE);
        std::fs::write(&marker, std::process::id().to_string()).map_err(io(&marker))?;
        let manifest = self.out_dir.join(MANIFEST);
        match std::fs::remove_file(&manifest) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&manifest)(e)),
            _ => {}
        }
        let mut listing = String::new();
        let mut moved = Vec::with_capacity(moves.len());
        for (what, from, dest) in moves {
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            if let Some(mode) = &mode {
                std::fs::set_permissions(&from, mode.clone()).map_err(io(&from))?;
            }
            std::fs::rename(&from, &dest).map_err(io(&dest))?;
            listing += &format!("{}\n", dest.strip_prefix(&self.out_dir).unwrap_or(&dest).display());
            moved.push((what, dest));
        }
        let staged_manifest = self.path().join(MANIFEST);
        std::fs::write(&staged_manifest, listing).map_err(io(&staged_manifest))?;
        std::fs::rename(&staged_manifest, &manifest).map_err(io(&manifest))?;
        std::fs::remove_file(&marker).map_err(io(&marker))?;
        self.committed = true;
        Ok(moved)
    }
}

impl Drop for Staging {
    /// Removes the staging directory, then the output directory when this run created it and
    /// failed (it is empty then: nothing was moved into it).
    fn drop(&mut self) {
        drop(self.dir.take());
        if self.created && !self.committed {
            let _ = std::fs::remove_dir(&self.out_dir);
        }
    }
}

/// Refuses an output of a run that was stopped while moving its files into place (the directory
/// of `file` still has [`INCOMPLETE`]): its files may come from two runs.
pub fn check_complete(file: &Path) -> Result<()> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let marker = dir.join(INCOMPLETE);
    if !marker.exists() {
        return Ok(());
    }
    // A run moving files right now holds the directory's lock.
    let busy = std::fs::File::open(dir).is_ok_and(|d| d.try_lock_shared().is_err());
    let why = if busy {
        "a run is moving its outputs into this directory right now: wait for it to finish"
    } else {
        "a run was stopped while moving its outputs into this directory, so its files may come from two runs: \
         run it again"
    };
    Err(ApiError::data(file, why))
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
        let mut left: Vec<String> =
            std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, vec![MANIFEST.to_string(), "quant.json".to_string()]);
        assert_eq!(std::fs::read_to_string(out.join(MANIFEST)).unwrap(), "quant.json\n");
    }

    #[test]
    fn a_second_run_on_the_same_directory_is_refused_while_the_first_runs() {
        let dir = tempfile::tempdir().unwrap();
        let first = Staging::new(dir.path(), &[]).unwrap();
        let msg = Staging::new(dir.path(), &[]).err().unwrap().to_string();
        assert!(msg.contains("another mppq run is writing into this directory"), "{msg}");
        drop(first);
        assert!(Staging::new(dir.path(), &[]).is_ok(), "the lock goes with the run");
    }

    #[test]
    fn a_failed_run_removes_the_directory_it_created_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new");
        let staging = Staging::new(&out, &[]).unwrap();
        std::fs::write(staging.path().join("model.qdq.onnx"), b"half").unwrap();
        drop(staging);
        assert!(!out.exists(), "a failed run left its empty output directory behind");
        // A directory the user made stays.
        drop(Staging::new(dir.path(), &[]).unwrap());
        assert!(dir.path().exists());
    }

    #[test]
    fn outputs_of_an_interrupted_move_are_refused_by_readers() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("quant.json");
        std::fs::write(&json, b"{}").unwrap();
        assert!(check_complete(&json).is_ok());
        // A run killed between its renames leaves the marker.
        std::fs::write(dir.path().join(INCOMPLETE), b"4294967295").unwrap();
        let msg = check_complete(&json).unwrap_err().to_string();
        assert!(msg.contains("stopped while moving its outputs") && msg.contains("quant.json"), "{msg}");
        // The next complete run removes it.
        let staging = Staging::new(dir.path(), &[]).unwrap();
        let file = staging.path().join("quant.json");
        std::fs::write(&file, b"{}").unwrap();
        staging.commit(vec![("quant JSON".into(), file)]).unwrap();
        assert!(check_complete(&json).is_ok());
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
