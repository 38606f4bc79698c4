// The Python module gossip._gossip (pybind11) over include/gossip/peer.h. Buffers come through
// the buffer protocol (numpy arrays; torch tensors via gossip/__init__.py): float32, C-contiguous,
// writable, mixed in place with no copy. The GIL is released while the peer communicates; a
// gossip::Error becomes a RuntimeError with the same message.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <span>
#include <string>

#include "gossip/peer.h"

namespace py = pybind11;

namespace {

// The float32 C-contiguous writable buffer behind `obj`, or a TypeError/ValueError naming what is wrong.
std::span<float> float_buffer(const py::buffer& obj, bool writable = true) {
  const py::buffer_info info = obj.request(writable);
  if (info.format != py::format_descriptor<float>::format() || info.itemsize != sizeof(float))
    throw py::type_error("gossip: the parameters must be float32, not format '" + info.format + "'");
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] != 1 && info.strides[d] != expected)
      throw py::value_error("gossip: the parameters must be one contiguous buffer (C order, no strides)");
    expected *= info.shape[d];
  }
  return {static_cast<float*>(info.ptr), static_cast<size_t>(info.size)};
}

std::unique_ptr<gossip::Peer> make_peer(const py::buffer& params, std::optional<std::string> config,
                                        std::optional<int> rank, int64_t steps, std::optional<std::string> join,
                                        const std::string& bind, std::optional<std::string> rendezvous,
                                        std::optional<bool> resume) {
  gossip::PeerOptions o;
  if (config) {
    o.config = *config;
    if (rank) o.rank = *rank;
  } else {
    o = gossip::PeerOptions::from_environment();  // as gossip-launch CONFIG -- CMD sets it
    if (rank) o.rank = *rank;
  }
  if (join) {
    o.join = join;
    o.bind = bind;
  } else if (!rank && o.rank < 0) {  // (a rank given is checked against the YAML's peers)
    throw py::value_error("gossip.Peer: give rank= (or start the script with gossip-launch CONFIG -- CMD)");
  }
  if (rendezvous) o.rendezvous_dir = *rendezvous;
  if (resume) o.resume = *resume;
  o.steps = steps;
  const std::span<float> buffer = float_buffer(params);
  py::gil_scoped_release release;
  return std::make_unique<gossip::Peer>(o, buffer);
}

}  // namespace

PYBIND11_MODULE(_gossip, m) {
  m.doc() = "gossip peers mixing the caller's parameter buffer (see gossip/__init__.py)";
  py::class_<gossip::Peer>(m, "Peer")
      .def(py::init(&make_peer), py::arg("params"), py::arg("config") = py::none(), py::arg("rank") = py::none(),
           py::arg("steps") = 0, py::arg("join") = py::none(), py::arg("bind") = "tcp://127.0.0.1:0",
           py::arg("rendezvous") = py::none(), py::arg("resume") = py::none())
      .def(
          "mix",
          [](gossip::Peer& p, int64_t step, const py::buffer& params) {
            const std::span<float> b = float_buffer(params);
            py::gil_scoped_release release;
            return p.mix(step, b);
          },
          py::arg("step"), py::arg("params"))
      .def(
          "average",
          [](gossip::Peer& p, const py::buffer& params) {
            const std::span<float> b = float_buffer(params);
            py::gil_scoped_release release;
            return p.average(b);
          },
          py::arg("params"))
      .def(
          "consensus",
          [](gossip::Peer& p, const py::buffer& params) {
            const std::span<float> b = float_buffer(params, false);
            gossip::ConsensusDistance c;
            {
              py::gil_scoped_release release;
              c = p.consensus(b);
            }
            return py::make_tuple(c.distance, c.mean_norm2);  // with the GIL again
          },
          py::arg("params"))
      .def("checkpoint_due", &gossip::Peer::checkpoint_due, py::arg("step"))
      .def("report", &gossip::Peer::report, py::arg("loss"), py::arg("train_accuracy") = 0.0,
           py::arg("samples_per_s") = 0.0)
      .def("leave", &gossip::Peer::leave)
      .def(
          "close",
          [](gossip::Peer& p) {
            py::gil_scoped_release release;
            p.close();
          })
      .def_property_readonly("rank", &gossip::Peer::rank)
      .def_property_readonly("size", &gossip::Peer::size)
      .def_property_readonly("epoch", &gossip::Peer::epoch)
      .def_property_readonly("start_step", &gossip::Peer::start_step)
      .def_property_readonly("next_step", &gossip::Peer::next_step)
      .def_property_readonly("total_steps", &gossip::Peer::total_steps)
      .def_property_readonly("num_params", &gossip::Peer::num_params);
  m.def(
      "params_crc", [](const py::buffer& params) { return gossip::params_crc(float_buffer(params, false)); },
      py::arg("params"));
}
