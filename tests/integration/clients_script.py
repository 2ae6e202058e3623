"""One run of real client libraries over MiniLM: ``python clients_script.py MODEL_DIR OUT_DIR``.

test_clients.py runs it twice, in separate processes: once plainly (upstream safetensors) and
once through ``python -m pysafetensors.run``; the two OUT_DIRs must match byte for byte.
Every library reads and writes safetensors files through ``import safetensors``:
- transformers: ``from_pretrained``, ``save_pretrained(max_shard_size=...)`` and reload;
- sentence-transformers: ``encode``;
- peft: a LoRA adapter saved and loaded back;
- accelerate: ``load_checkpoint_in_model`` from the sharded directory, ``Accelerator.save_model``.
Outputs go to OUT_DIR/results as .npy files; OUT_DIR/report.json says which safetensors ran.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)  # one thread: the same reduction order in both processes
torch.use_deterministic_algorithms(True)

MODEL, OUT = sys.argv[1], sys.argv[2]
RESULTS = os.path.join(OUT, "results")
os.makedirs(RESULTS)
SENTENCES = ["safetensors stores tensors safely", "a second, longer sentence about loading checkpoints"]


def keep(name: str, value: torch.Tensor | np.ndarray) -> None:
    array = value.detach().numpy() if isinstance(value, torch.Tensor) else value
    np.save(os.path.join(RESULTS, f"{name}.npy"), array)


def forward(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch).last_hidden_state


# --- transformers ----------------------------------------------------------------------------
from transformers import AutoConfig, AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(MODEL)
batch = dict(tokenizer(SENTENCES, return_tensors="pt", padding=True))
model = AutoModel.from_pretrained(MODEL).eval()
keep("transformers_from_pretrained", forward(model, batch))

sharded = os.path.join(OUT, "sharded")
model.save_pretrained(sharded, max_shard_size="30MB")
reloaded = AutoModel.from_pretrained(sharded).eval()
keep("transformers_reloaded", forward(reloaded, batch))
state = model.state_dict()
assert all(torch.equal(state[k], v) for k, v in reloaded.state_dict().items())

# --- sentence-transformers -------------------------------------------------------------------
from sentence_transformers import SentenceTransformer

keep("sentence_transformers_encode", SentenceTransformer(MODEL, device="cpu").encode(SENTENCES))

# --- peft ------------------------------------------------------------------------------------
from peft import LoraConfig, PeftModel, get_peft_model

torch.manual_seed(0)
config = LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"], init_lora_weights=False)
lora = get_peft_model(AutoModel.from_pretrained(MODEL), config).eval()
keep("peft_lora", forward(lora, batch))
adapter = os.path.join(OUT, "adapter")
lora.save_pretrained(adapter)
lora_loaded = PeftModel.from_pretrained(AutoModel.from_pretrained(MODEL), adapter).eval()
keep("peft_lora_loaded", forward(lora_loaded, batch))

# --- accelerate ------------------------------------------------------------------------------
from accelerate import Accelerator
from accelerate.utils import load_checkpoint_in_model

torch.manual_seed(1)
fresh = AutoModel.from_config(AutoConfig.from_pretrained(MODEL)).eval()
load_checkpoint_in_model(fresh, sharded)
keep("accelerate_load_checkpoint", forward(fresh, batch))
assert all(torch.equal(state[k], v) for k, v in fresh.state_dict().items())
Accelerator(cpu=True).save_model(model, os.path.join(OUT, "accelerate"), max_shard_size="40MB")

# --- which safetensors ran -------------------------------------------------------------------
import safetensors
import safetensors.torch

upstream_dir = os.path.dirname(os.path.realpath(safetensors.__file__)) if hasattr(safetensors, "__file__") else None
with open(os.path.join(OUT, "report.json"), "w") as fh:
    json.dump(
        {
            "alias": getattr(safetensors, "__alias_of__", None),
            "version": safetensors.__version__,
            "torch_face": safetensors.torch.__name__,
            "safe_open": f"{safetensors.safe_open.__module__}.{safetensors.safe_open.__qualname__}",
            "modules": sorted(
                name for name, m in sys.modules.items() if name.split(".")[0] in ("safetensors", "pysafetensors")
                and m is not None
            ),
            "files": sorted(
                str(getattr(m, "__file__", "")) for name, m in list(sys.modules.items())
                if name.split(".")[0] == "safetensors" and m is not None
            ),
            "upstream_dir": upstream_dir,
        },
        fh,
    )
