"""A tiny random chat model, built offline in a second: for tests and smoke runs of the LLM paths.

`make_tiny_model(folder)` trains a small byte-level BPE tokenizer on a little code-like text with the
`tokenizers` library, gives it a ChatML template, builds a 2-layer Llama with random weights, and saves
both as a normal transformers checkpoint (so `HFPolicy(folder)` and the server load it like any model).
Its replies are random text; what it exercises is the plumbing, not the quality.
"""

from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "import torch\nimport torch.nn as nn\nfrom kernelgym.kernels import load_cpp\n",
    "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
    "    def forward(self, x):\n        return torch.relu(x)\n",
    '```python\nSOURCE = r"""\nextern "C" void relu(const float* x, float* y, long n) {\n',
    "  for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;\n}\n\"\"\"\n```\n",
    "The judge builds your module, checks it against the reference, then times both. Feedback: speedup 1.5x.",
    "You are an expert performance engineer. Write a faster ModelNew using the cpp backend. DONE",
]


def make_tiny_model(folder: str | Path, *, vocab_size: int = 384, hidden: int = 32, layers: int = 2,
                    seed: int = 0, context: int = 2048) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    raw.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<|im_start|>",
                                        eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    return folder
