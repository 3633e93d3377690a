# The README's ten lines: quantize a testdata model from a PyTorch DataLoader (run from the repository root).
import numpy as np, torch
from torch.utils.data import DataLoader, TensorDataset
import mppq_rs

images = np.concatenate([np.load(f"testdata/tiny_cnn_calib/batch_{i:03}.npz")["input"] for i in range(8)])
loader = DataLoader(TensorDataset(torch.from_numpy(images), torch.zeros(len(images))), batch_size=1)
result = mppq_rs.quantize("testdata/tiny_cnn.onnx", loader, collate=lambda batch: batch[0])
result.save("out-python")
print(result.summary)
