// c10d's ProcessGroupGloo for the CPU path, without ProcessGroupGloo.hpp: that
// header includes gloo's own headers, which the torch wheel does not ship
// (torch/include has no gloo/), while libtorch_cpu.so exports the class's
// constructor, destructor and Options. So this file declares the part of the
// class it calls, with the signatures of torch 2.11's header (the version
// scripts/setup.sh pins):
//   - Options exactly as the header defines it (same bases and members, so the
//     layout and the implicitly defined members agree with the library's);
//   - the constructor and the (out-of-line) destructor, which makes the
//     destructor the key function: the vtable and type info stay the
//     library's, none is emitted here;
//   - room for the members this file never touches: the library's constructor
//     initialises them (about 400 bytes in 2.11; 8 KiB reserved).
// Everything else goes through the c10d::Backend interface (virtual calls
// into the library). The gloo test of tests/test_ring.cpp runs this path.
#include "distributed/gloo_backend.h"

#if defined(USE_C10D_GLOO)

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace c10d {

class TORCH_API ProcessGroupGloo : public Backend {
 public:
  struct TORCH_API Options : public Backend::Options {
    explicit Options(std::chrono::milliseconds timeout = kBackendDefaultTimeout);
    static c10::intrusive_ptr<Options> create(std::chrono::milliseconds timeout = kBackendDefaultTimeout) {
      return c10::make_intrusive<Options>(timeout);
    }
    static c10::intrusive_ptr<Options> create_default(std::chrono::milliseconds timeout = kBackendDefaultTimeout);
    std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
    int threads{2};
  };

  static std::shared_ptr<::gloo::transport::Device> createDeviceForHostname(const std::string& hostname,
                                                                            bool lazyInit = false);

  ProcessGroupGloo(const c10::intrusive_ptr<Store>& store, int rank, int size,
                   c10::intrusive_ptr<Options> options = Options::create());
  ~ProcessGroupGloo() override;

 private:
  alignas(std::max_align_t) unsigned char members_[8192];
};

}  // namespace c10d

namespace attnprof::ring {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, bool loopback) {
  // create_default binds to the address this host's name resolves to (or
  // GLOO_SOCKET_IFNAME's interfaces); ranks of one host talk over loopback.
  auto options = c10d::ProcessGroupGloo::Options::create_default(timeout);
  if (loopback && !std::getenv("GLOO_SOCKET_IFNAME")) {
    options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace attnprof::ring

#endif  // USE_C10D_GLOO
