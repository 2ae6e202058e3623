"""Run llama.cpp's own ``convert_hf_to_gguf.py`` on several model directories in one process.

``python llamacpp_driver.py LLAMA_CPP_DIR JOBS.json``: JOBS is a list of argument lists, each what
``convert_hf_to_gguf.py`` takes on its command line (``[model_dir, "--outtype", "f32", "--outfile",
out]``).  The converter and its bundled gguf-py are llama.cpp's; the one thing changed is the
vocabulary: the tiny test models have no real tokenizer (their tokenizers need the network or
sentencepiece models), so each model class's ``set_vocab`` writes a placeholder vocabulary of the
model's ``vocab_size``.  The tensors, which the tests are about, are the converter's own.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any


def _placeholder_vocab(self: Any) -> None:
    n = int(self.hparams.get("vocab_size") or self.hparams.get("padded_vocab_size") or 0)
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("default")
    self.gguf_writer.add_token_list([f"<t{i}>" for i in range(n)])
    self.gguf_writer.add_token_types([1] * n)


def main() -> None:
    root = Path(sys.argv[1])
    jobs = json.loads(Path(sys.argv[2]).read_text())
    sys.path.insert(0, str(root))
    sys.path.insert(1, str(root / "gguf-py"))
    import conversion  # llama.cpp's converter package, beside convert_hf_to_gguf.py

    original = conversion.get_model_class

    def get_model_class(name: str, mmproj: bool = False) -> Any:
        cls = original(name, mmproj)
        return type(cls.__name__, (cls,), {"set_vocab": _placeholder_vocab, "model_arch": cls.model_arch})

    conversion.get_model_class = get_model_class
    script = root / "convert_hf_to_gguf.py"
    converter = runpy.run_path(str(script), run_name="convert_hf_to_gguf")
    failed = []
    for args in jobs:
        sys.argv = [str(script), *args]
        try:
            converter["main"]()
        except SystemExit as e:
            if e.code not in (None, 0):
                failed.append(f"{args}: exit {e.code}")
        except Exception as e:  # noqa: BLE001 -- one model's failure is reported, the others still convert
            failed.append(f"{args}: {e!r}")
    if failed:
        sys.exit("\n".join(failed))


if __name__ == "__main__":
    main()
