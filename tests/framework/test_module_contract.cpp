// The btl contract's shape: a core-only module offers no capability, a module
// hands out the interfaces it implements (also one added after ABI 3.0, through
// extension()), and the atomic request helpers clear what an atomic ignores.
#include <gtest/gtest.h>

#include "tests/fixtures/core_module.hpp"
#include "transit/btl/component.hpp"

namespace {

using namespace transit;

class TestComponent final : public btl::Component {
  public:
    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext&) override { return {}; }
};

using fixture::CoreModule;

// A capability interface of the kind added after 3.0: found by its id.
class Probe {
  public:
    static constexpr std::uint32_t id = 0x70726f62;
    virtual int probe() noexcept = 0;

  protected:
    ~Probe() = default;
};

// Derives from the interfaces after Module, so each pointer handed out is
// adjusted from `this`: calls through it must reach this object.
class FullModule final : public CoreModule, public btl::Rdma, public Probe {
  public:
    using CoreModule::CoreModule;
    btl::Rdma* rdma() noexcept override { return this; }
    void* extension(std::uint32_t id) noexcept override {
        return id == Probe::id ? static_cast<Probe*>(this) : nullptr;
    }
    Status put(const btl::RdmaRequest& r) noexcept override {
        last_size = r.size;
        return Status::completed;
    }
    Status get(const btl::RdmaRequest& r) noexcept override { return put(r); }
    btl::RegistrationHandle* register_mem(btl::Endpoint*, void*, std::size_t,
                                          std::uint32_t) override {
        return nullptr;
    }
    Status deregister_mem(btl::RegistrationHandle*) override { return Status::success; }
    Status flush(btl::Endpoint*) override { return Status::success; }
    int probe() noexcept override { return ++probes; }

    std::size_t last_size = 0;
    int probes = 0;
};

TEST(ModuleContract, CoreModuleOffersNoCapability) {
    TestComponent c;
    CoreModule m(c);
    EXPECT_EQ(m.rdma(), nullptr);
    EXPECT_EQ(m.atomics(), nullptr);
    EXPECT_EQ(btl::capability<Probe>(m), nullptr);
}

TEST(ModuleContract, ModuleHandsOutWhatItImplements) {
    TestComponent c;
    FullModule m(c);
    btl::Module& base = m;
    ASSERT_NE(base.rdma(), nullptr);
    EXPECT_EQ(base.atomics(), nullptr);
    EXPECT_EQ(base.rdma()->put({.size = 42}), Status::completed);
    EXPECT_EQ(m.last_size, 42u);
    Probe* p = btl::capability<Probe>(base);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->probe(), 1);
    EXPECT_EQ(m.probes, 1);
    EXPECT_EQ(base.extension(Probe::id + 1), nullptr) << "an id it does not know";
}

TEST(ModuleContract, RequestDefaultsAreTheNeutralValues) {
    const btl::RdmaRequest r{};
    EXPECT_EQ(r.flags, 0);
    EXPECT_EQ(r.order, btl::no_order);
    EXPECT_EQ(r.cb, nullptr);
    const btl::AtomicRequest a{};
    EXPECT_EQ(a.order, btl::no_order);
    EXPECT_EQ(a.compare, 0u);
}

TEST(ModuleContract, AtomicHelpersClearWhatEachAtomicIgnores) {
    std::uint64_t result = 0;
    btl::RegistrationHandle* handle = reinterpret_cast<btl::RegistrationHandle*>(&result);
    const btl::AtomicRequest full{.local = &result,
                                  .remote = 64,
                                  .local_handle = handle,
                                  .op = btl::AtomicOp::xor_,
                                  .operand = 5,
                                  .compare = 7};
    const btl::AtomicRequest op = btl::as_atomic_op(full);
    EXPECT_EQ(op.local, nullptr);
    EXPECT_EQ(op.local_handle, nullptr);
    EXPECT_EQ(op.compare, 0u);
    EXPECT_EQ(op.op, btl::AtomicOp::xor_);
    const btl::AtomicRequest fop = btl::as_atomic_fop(full);
    EXPECT_EQ(fop.local, &result);
    EXPECT_EQ(fop.local_handle, handle);
    EXPECT_EQ(fop.compare, 0u);
    const btl::AtomicRequest cswap = btl::as_atomic_cswap(full);
    EXPECT_EQ(cswap.op, btl::AtomicOp::swap);
    EXPECT_EQ(cswap.compare, 7u);
    EXPECT_EQ(cswap.operand, 5u);
    EXPECT_EQ(cswap.remote, 64u);
}

}  // namespace
