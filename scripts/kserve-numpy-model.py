"""A small NumPy model behind the PyPI `kserve` package's model server (KServe v2 / Open
Inference Protocol REST, `POST /v2/models/linear/infer`): a fixed random linear layer and a
softmax over each row of the input tensor. FP32 tensors are used as they are; BYTES tensors
(texts) become byte histograms of `--features` bins first. Output `probabilities`, shape
[rows, classes]. Started by `scripts/kserve-server.sh start` and by the tests."""
import argparse

import numpy as np
from kserve import Model, ModelServer, InferRequest, InferResponse, InferOutput


class Linear(Model):
    def __init__(self, name: str, features: int, classes: int):
        super().__init__(name)
        self.weights = np.random.default_rng(0).standard_normal((features, classes)).astype(np.float32)
        self.ready = True

    def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        x = payload.inputs[0].as_numpy()
        if x.dtype == object:  # BYTES: each text becomes a byte histogram of `features` bins
            texts = [t.decode() if isinstance(t, bytes) else str(t) for t in x.reshape(-1)]
            x = np.stack([np.bincount(np.frombuffer(t.encode(), np.uint8) % self.weights.shape[0],
                                      minlength=self.weights.shape[0]) for t in texts])
        x = x.astype(np.float32).reshape(x.shape[0], -1)
        logits = x @ self.weights[: x.shape[1]]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        out = InferOutput(name="probabilities", shape=list(probs.shape), datatype="FP32")
        out.set_data_from_numpy(probs)
        return InferResponse(model_name=self.name, infer_outputs=[out], response_id=payload.id or "0")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--classes", type=int, default=4)
    args, _ = parser.parse_known_args()
    ModelServer().start([Linear("linear", args.features, args.classes)])
