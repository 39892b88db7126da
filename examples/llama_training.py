"""A few training steps of a small Llama built from a transformers config (random weights, no download).

    proton-profile --name llama --hook torch examples/llama_training.py
    proton-view -m time/ms llama.hatchet

Nothing of Proton's in it: under ``proton-profile --hook torch`` each kernel lands under the module path and
aten operator that launched it, and backward kernels under the forward operator that created them.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main(steps: int = 5) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=256, intermediate_size=704, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=4096, max_position_embeddings=256)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the host backend shows scopes, no kernels
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (4, 128), device=device)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"loss {loss.item():.3f} after {steps} steps")


if __name__ == "__main__":
    main()
