"""Goldens for qloom's rotation (quant/hadamard.h, quant/rotation.h) from AMD Quark 0.13 itself.

Needs amd-quark==0.13, torch, scipy (and accelerate + transformers for --model).
Writes tests/data/rotation/quark_hadamard.json:
  known: sha256 of each of Quark's hand-listed Hadamard matrices that qloom
         constructs (hadamard.py KNOWN_HADAMARD_MATRICES, as int8 bytes, row-major)
  full:  sha256 of get_rotation_matrix(n) * sqrt(n) as int8 for a few sizes
         (kron(H_K, H_m), Quark's R1 / R2 matrices)
  llama_algo_config: RotationConfig's dict for model type llama, as
         quantization_config.algo_config holds it (ROTATION_MAP["llama"].to_dict()).
Usage: python rotation_quark.py [OUTPUT_DIR]   (default: tests/data/rotation)
"""
import hashlib, json, math, os, sys

import torch
from quark.torch.algorithm.rotation import hadamard
from quark.torch.algorithm.rotation.rotation_utils import get_rotation_matrix
from quark.torch.quantization.config.algo_configs import ROTATION_MAP

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "tests", "data", "rotation")


def sha(t):
    return hashlib.sha256(t.to(torch.int8).contiguous().numpy().tobytes()).hexdigest()


def main():
    known = {str(k): sha(f()) for k, f in hadamard.KNOWN_HADAMARD_MATRICES.items() if k not in (52, 156, 172)}
    full = {}
    for n in (64, 576, 1536, 960, 3072):
        r = get_rotation_matrix(n, device="cpu", random=False) * math.sqrt(n)
        full[str(n)] = sha(torch.round(r))
    os.makedirs(OUT, exist_ok=True)
    out = {"quark": "0.13", "known": known, "full": full, "llama_algo_config": ROTATION_MAP["llama"].to_dict()}
    with open(os.path.join(OUT, "quark_hadamard.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
