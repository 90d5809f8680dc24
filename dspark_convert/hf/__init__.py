"""Hugging Face inputs: checkpoints (lazy, validated safetensors; pickles only with weights_only) and Hub ids."""
