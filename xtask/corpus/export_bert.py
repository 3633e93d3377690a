#!/usr/bin/env python3
"""Exports a Hugging Face BERT encoder (a folder with config.json and model.safetensors) to ONNX
the way users do: `torch.onnx.export` (TorchScript exporter, as Optimum's `feature-extraction`
task), inputs input_ids / attention_mask / token_type_ids with dynamic batch and sequence, output
last_hidden_state, opset 14 (Optimum's default for BERT), the model's default attention.

Run by corpus.py in the export environment (xtask/corpus/export-requirements.txt: torch,
transformers), which the corpus's own environment does not carry.

Usage: export_bert.py MODEL_DIR OUT.onnx
"""

import sys

import torch
from transformers import BertModel


class Encoder(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    bert = BertModel.from_pretrained(model_dir).eval()
    ids = torch.ones(2, 16, dtype=torch.int64)
    mask = torch.ones(2, 16, dtype=torch.int64)
    types = torch.zeros(2, 16, dtype=torch.int64)
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(Encoder(bert), (ids, mask, types), out, dynamo=False, opset_version=14,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                        "last_hidden_state": axes})


if __name__ == "__main__":
    main()
