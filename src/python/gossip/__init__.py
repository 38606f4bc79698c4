"""gossip from Python: this process is one peer of a decentralized run, mixing its own model.

    import gossip, torch
    model = MyNet()
    flat = gossip.flatten_parameters(model)    # one float32 tensor; the parameters view it
    peer = gossip.Peer(flat)                    # config and rank from gossip-launch CONFIG -- CMD
    for step in peer.steps(steps):              # from 0, a joiner's or a resumed run's first step
        ...; loss.backward(); opt.step()        # the optimiser updates the views in place
        peer.mix(step, flat)                    # the YAML's algorithm, in place, no copy
    peer.average(flat)                          # every peer ends with the exact average
    peer.close()

Buffers are float32 C-contiguous numpy arrays or CPU torch tensors; anything else is a TypeError
or ValueError, and the run's own errors are RuntimeErrors with gossip's message. With
`checkpoint: {dir, every}` in the YAML, mix() checkpoints the buffer and the algorithm's state;
gossip-launch --resume (or Peer(..., resume=True)) restarts every peer from the newest common one.
"""
from . import _gossip

__all__ = ["Peer", "flatten_parameters", "params_crc"]


def _buffer(params):
    """A buffer-protocol view of `params` with no copy (torch tensors through .numpy())."""
    mod = type(params).__module__
    if mod.startswith("torch"):
        if params.device.type != "cpu":
            raise ValueError(f"gossip: the parameters must be on the CPU, not {params.device}")
        if not params.is_contiguous():
            raise ValueError("gossip: the parameters must be one contiguous buffer (C order, no strides)")
        return params.detach().numpy()  # shares the tensor's memory; a non-float32 tensor is refused below
    return params


class Peer:
    """One peer of the run. `params` is the whole model as one buffer (see flatten_parameters).
    Without `config`, the config and rank come from GOSSIP_CONFIG and GOSSIP_RANK (gossip-launch
    CONFIG -- CMD sets them). `steps`: the run's length, for joiners (default: the YAML's).
    `resume`: continue from the newest checkpoint every peer has (default: GOSSIP_RESUME, which
    gossip-launch --resume sets); `params` then holds its model and start_step its step."""

    def __init__(self, params, config=None, rank=None, steps=0, join=None, bind="tcp://127.0.0.1:0",
                 rendezvous=None, resume=None):
        self._peer = _gossip.Peer(_buffer(params), config=config, rank=rank, steps=steps, join=join, bind=bind,
                                  rendezvous=rendezvous, resume=resume)

    def mix(self, step, params):
        """The exchange for `step` (next_step: one call per step, in order), in place. False once
        this peer has left the run."""
        return self._peer.mix(step, _buffer(params))

    def steps(self, count=None):
        """The steps to train, each ended by one mix(step, params): from start_step up to `count`
        (default: the run's length, total_steps). A peer that stalled until the others cut it off
        is taken back within mix(): its buffer then holds its contact's model and the next step
        is the run's (next_step jumps; reset the optimiser's state there, as a joiner starts)."""
        end = self.total_steps if count is None else int(count)
        if end <= 0:
            raise ValueError("gossip: Peer.steps() needs a count: this run's length is not known (give Peer steps=)")
        while (step := self._peer.next_step) < end:
            yield step
            if self._peer.next_step == step:
                raise RuntimeError(f"gossip: step {step} of Peer.steps() ended without mix({step}, params)")

    def average(self, params):
        """At the end, on every peer: `params` becomes the exact average of all peers' models."""
        return self._peer.average(_buffer(params))

    def consensus(self, params):
        """Collective: (Ξ, ‖x̄‖²), Ξ = (1/n)·Σ‖x_i − x̄‖² over the peers' buffers."""
        return self._peer.consensus(_buffer(params))

    def report(self, loss, train_accuracy=0.0, samples_per_s=0.0):
        """Your training figures for the control channel: gossip-consensus --status and the
        Prometheus metrics show them for this peer."""
        self._peer.report(float(loss), float(train_accuracy), float(samples_per_s))

    def checkpoint_due(self, step):
        """Whether mix(step) writes a checkpoint (the YAML's checkpoint: {dir, every}) of the
        buffer and the algorithm's state. Save your optimiser's state for the same step yourself."""
        return self._peer.checkpoint_due(step)

    def leave(self):
        """Leave gracefully at the next mix() (which then returns False)."""
        self._peer.leave()

    def close(self):
        """Closes the sockets: after average(), before long work of this process alone (else
        the others, still running, may report it as suspected dead once they stop hearing it)."""
        self._peer.close()

    rank = property(lambda self: self._peer.rank)
    size = property(lambda self: self._peer.size)
    epoch = property(lambda self: self._peer.epoch)
    start_step = property(lambda self: self._peer.start_step)  # 0, a joiner's or a resumed peer's first step
    next_step = property(lambda self: self._peer.next_step)  # the step the next mix() is for
    total_steps = property(lambda self: self._peer.total_steps)  # the run's length (0: not known)
    num_params = property(lambda self: self._peer.num_params)


def params_crc(params):
    """CRC-32C of the buffer's bytes: the params_crc of gossip's final lines."""
    return _gossip.params_crc(_buffer(params))


def flatten_parameters(module):
    """Moves every parameter of the torch module into one new float32 tensor and makes each
    parameter a view of its slice, so that mixing the returned tensor mixes the model with no
    copy. Call it before creating the optimiser; gradients and optimiser state are not touched."""
    import torch

    params = [p for p in module.parameters()]
    if any(p.dtype != torch.float32 or p.device.type != "cpu" for p in params):
        raise ValueError("gossip.flatten_parameters: every parameter must be a float32 CPU tensor")
    flat = torch.empty(sum(p.numel() for p in params), dtype=torch.float32)
    offset = 0
    for p in params:
        n = p.numel()
        flat[offset:offset + n].copy_(p.detach().reshape(-1))
        p.data = flat[offset:offset + n].view_as(p)
        offset += n
    return flat
