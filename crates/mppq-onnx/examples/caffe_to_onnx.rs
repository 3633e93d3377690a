//! Converts a Caffe net to ONNX: `cargo run -p mppq-onnx --example caffe_to_onnx -- NET.prototxt
//! NET.caffemodel OUT.onnx`. Used by `xtask/python/caffe_check.py` to compare with OpenCV.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [prototxt, caffemodel, out] = args.as_slice() else {
        eprintln!("usage: caffe_to_onnx NET.prototxt NET.caffemodel OUT.onnx");
        return ExitCode::from(2);
    };
    let saved = mppq_onnx::load_caffe(prototxt, caffemodel)
        .and_then(|model| mppq_onnx::save_model(&model, out, &mppq_onnx::SaveOptions::default()));
    match saved {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
