//! Image preprocessing against Pillow + NumPy: every case of `testdata/images_golden/cases.json`
//! gives the tensor of `testdata/images_golden/golden.npz` (written by `xtask/python/gen_image_golden.py`
//! with Pillow 13): exactly for the 8-bit steps (decode of PNG, resize, crop, letterbox, channel
//! order, layout), within 1e-6 for the float normalisation. JPEG decoding (zune-jpeg here,
//! libjpeg-turbo in Pillow) is the one step that differs: by at most 3 of 255 levels here (949 of
//! 3,219 values, chroma upsampling), asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_api::data::calib::{ImagePipeline, ImageSpec};
use mppq_api::ir::DataType;
use std::path::PathBuf;

fn images() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/images")
}

#[test]
fn preprocessing_equals_pillow_and_numpy() {
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(testdata().join("images_golden/cases.json")).unwrap()).unwrap();
    let golden = mppq_api::data::npy::read_npz(&testdata().join("images_golden/golden.npz")).unwrap();
    assert_eq!(cases.len(), golden.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let mut spec = case["spec"].clone();
        let uint8 = spec.as_object_mut().unwrap().remove("dtype").is_some_and(|d| d == "uint8");
        let spec: ImageSpec = serde_json::from_value(spec).unwrap();
        let dtype = if uint8 { DataType::Uint8 } else { DataType::Float };
        let pipeline = ImagePipeline::new(&spec, dtype).unwrap();
        let ours = pipeline.load(&images().join(case["image"].as_str().unwrap())).unwrap();
        let want = &golden.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} not in golden.npz")).1;
        assert_eq!(ours.shape(), want.shape(), "{name}: shape");
        assert_eq!(ours.dtype(), want.dtype(), "{name}: dtype");
        let (a, b) = (values(&ours), values(want));
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        // JPEG: zune-jpeg and libjpeg-turbo may round the IDCT and chroma upsampling differently.
        let bound = if name == "jpeg" { 3.0 / 255.0 + 1e-6 } else { 1e-6 };
        let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        println!("{name}: max |ours - Pillow| = {worst}, {differing} of {} values differ", a.len());
        if worst > bound || (uint8 && name != "jpeg" && differing > 0) {
            failures.push(format!("{name}: max |ours - Pillow| = {worst} (bound {bound}), {differing} values differ"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn values(t: &mppq_api::ir::TensorData) -> Vec<f32> {
    match t.dtype() {
        DataType::Uint8 => t.to_vec::<u8>().unwrap().into_iter().map(f32::from).collect(),
        _ => t.to_f32_vec().unwrap(),
    }
}

fn testdata() -> PathBuf {
    images().join("..")
}

/// An image folder quantizes a model end to end: 4 images of three sizes, resized to the
/// model's 32×32, in batches of 3 (the last one partial, kept: the batch dimension is dynamic).
#[test]
fn an_image_folder_calibrates_a_model() {
    let mut setting = mppq_api::QuantizeSetting::default();
    setting.data.batch = Some(3);
    setting.data.image.resize = Some("32x32".into());
    setting.data.image.mean = vec![0.5];
    let out = tempfile::tempdir().unwrap();
    let job = mppq_api::quantize::quantize_to_dir(
        &testdata().join("tiny_cnn.onnx"),
        &images(),
        setting.clone(),
        out.path(),
        &mut mppq_api::passes::NoProgress,
    )
    .unwrap();
    assert!(job.quantized_ops.0 > 0);
    assert_eq!(job.data_notes, vec!["the last batch holds 1 image(s), the others 3".to_string()]);
    let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let set = mppq_api::CalibrationSet::open(&model, &images(), &setting.data, None, &mut mppq_api::passes::NoProgress)
        .unwrap();
    assert_eq!(set.len(), 2);
    assert_eq!(set.batch(0).unwrap()[0].1.shape(), &[3, 3, 32, 32]);
    assert_eq!(set.batch(1).unwrap()[0].1.shape(), &[1, 3, 32, 32]);
    assert!(set.describe(0).contains("a.png") && set.describe(0).contains("3 images"), "{}", set.describe(0));
}

/// Without a resize, every image that does not become the model's size is named, with a fix.
#[test]
fn images_of_the_wrong_size_are_each_named() {
    let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let err = mppq_api::CalibrationSet::from_path(&model, &images(), None).unwrap_err().to_string();
    assert!(err.contains("4 files cannot be used"), "{err}");
    for f in ["a.png", "b.png", "c.png", "d.jpg"] {
        assert!(err.contains(f), "{f} missing in {err}");
    }
    assert!(err.contains("--resize 32x32"), "{err}");
    // A fixed batch of 1 (detect_branch: 1x3x64x64) rejects --batch 2.
    let model = mppq_onnx::load_model(testdata().join("detect_branch.onnx")).unwrap();
    let data = mppq_api::data::calib::DataSetting { batch: Some(2), ..Default::default() };
    let err = mppq_api::CalibrationSet::open(&model, &images(), &data, None, &mut mppq_api::passes::NoProgress)
        .unwrap_err()
        .to_string();
    assert!(err.contains("fixed batch size of 1"), "{err}");
}

/// Raw .bin files: the shape from the model (one dynamic dimension inferred from the length) or
/// from `input_shape`; a length that fits neither is refused naming the file and the bytes.
#[test]
fn raw_bin_files_calibrate_with_a_shape() {
    let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..2 * 3 * 32 * 32).map(|i| (i % 11) as f32 * 0.1).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.path().join("0.bin"), &bytes).unwrap();
    std::fs::write(dir.path().join("1.bin"), &bytes[..3 * 32 * 32 * 4]).unwrap();
    let set = mppq_api::CalibrationSet::from_path(&model, dir.path(), None).unwrap();
    assert_eq!(set.batch(0).unwrap()[0].1.shape(), &[2, 3, 32, 32]);
    assert_eq!(set.batch(1).unwrap()[0].1.shape(), &[1, 3, 32, 32]);
    assert_eq!(set.batch(0).unwrap()[0].1.to_f32_vec().unwrap(), values);
    // An explicit shape must match the length exactly.
    let mut data = mppq_api::data::calib::DataSetting::default();
    data.input_shape.insert(String::new(), vec![2, 3, 32, 32]);
    let err = mppq_api::CalibrationSet::open(&model, dir.path(), &data, None, &mut mppq_api::passes::NoProgress)
        .unwrap_err()
        .to_string();
    assert!(err.contains("1.bin") && err.contains("12288 bytes") && err.contains("24576"), "{err}");
    // A length that is no whole number of samples.
    std::fs::write(dir.path().join("2.bin"), &bytes[..1000]).unwrap();
    let err = mppq_api::CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
    assert!(err.contains("2.bin") && err.contains("1000 bytes"), "{err}");
    // Mixed kinds are refused.
    std::fs::remove_file(dir.path().join("2.bin")).unwrap();
    std::fs::copy(images().join("a.png"), dir.path().join("x.png")).unwrap();
    let err = mppq_api::CalibrationSet::from_path(&model, dir.path(), None).unwrap_err().to_string();
    assert!(err.contains("mixes") && err.contains("2 raw `.bin` files") && err.contains("1 image files"), "{err}");
}

/// More batches than the cache holds: the first ones stay in memory, the rest are read again,
/// giving the same tensors.
#[test]
fn batches_beyond_the_cache_are_read_again() {
    let model = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let calib = testdata().join("tiny_cnn_calib");
    let all = mppq_api::CalibrationSet::from_path(&model, &calib, None).unwrap();
    let small = mppq_api::data::calib::DataSetting { cache_mib: 0, ..Default::default() };
    let streamed =
        mppq_api::CalibrationSet::open(&model, &calib, &small, None, &mut mppq_api::passes::NoProgress).unwrap();
    assert_eq!(streamed.len(), all.len());
    assert!(streamed.notes()[0].starts_with("0 of 8 batches kept in memory"), "{:?}", streamed.notes());
    for i in 0..all.len() {
        assert!(*streamed.batch(i).unwrap() == *all.batch(i).unwrap());
    }
}
