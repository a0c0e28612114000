// Memory registration for the ofi module: RAII for libfabric objects, the
// packed handle peers receive, and the toolkit's registration cache.
//
// Every region is registered with all access rights, so one registration serves
// any later request that falls inside it; the rights the caller asked for are
// carried in the packed handle and checked by the initiator before it issues
// an operation, as are the bounds the caller registered (not the possibly
// larger cached region).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "ofi_library.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/types.hpp"
#include "transit/btl/util/registration_cache.hpp"

namespace transit::ofi {

// Owns one libfabric object (fid_fabric, fid_domain, fid_ep, fid_mr ...) and
// closes it at the end of its life.
template <typename T>
class FidPtr {
  public:
    FidPtr() = default;
    explicit FidPtr(T* p) : p_(p) {}
    FidPtr(FidPtr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    FidPtr& operator=(FidPtr&& o) noexcept {
        if (this != &o) {
            reset();
            p_ = o.p_;
            o.p_ = nullptr;
        }
        return *this;
    }
    ~FidPtr() { reset(); }
    void reset() noexcept {
        if (p_ != nullptr) fi_close(&p_->fid);
        p_ = nullptr;
    }
    T* get() const noexcept { return p_; }
    T* release() noexcept { return std::exchange(p_, nullptr); }
    T* operator->() const noexcept { return p_; }
    T** out() noexcept {
        reset();
        return &p_;
    }
    explicit operator bool() const noexcept { return p_ != nullptr; }

  private:
    T* p_ = nullptr;
};

// What the cache records of a libfabric registration (backend_handle is its fid_mr).
struct OfiKeys {
    std::uint64_t key = 0;
    void* desc = nullptr;
};
using CacheEntry = btl::util::Registration<OfiKeys>;

// What register_mem returns: the packed form first, as the contract requires.
struct OfiRegistration {
    PackedHandle packed;
    CacheEntry* entry = nullptr;
    OfiRegistration* next_free = nullptr;
    bool in_use = false;
};

// Registers regions with libfabric for the toolkit's cache, each with all
// access rights (the rights asked for travel in the packed handle).
class MrBackend final : public btl::util::RegistrationBackend<OfiKeys> {
  public:
    void setup(fid_domain* domain, fid_ep* ep, std::uint64_t mr_mode) noexcept {
        domain_ = domain;
        ep_ = ep;
        mr_mode_ = mr_mode;
    }
    bool register_region(CacheEntry& e) noexcept override {
        const std::uint64_t requested_key = (mr_mode_ & FI_MR_PROV_KEY) ? 0 : next_key_++;
        constexpr std::uint64_t access =
            FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        FidPtr<fid_mr> mr;
        int rc = fi_mr_reg(domain_, reinterpret_cast<void*>(e.base), e.length, access, 0,
                           requested_key, 0, mr.out(), nullptr);
        if (rc == 0 && (mr_mode_ & FI_MR_ENDPOINT)) {
            rc = fi_mr_bind(mr.get(), &ep_->fid, 0);
            if (rc == 0) rc = fi_mr_enable(mr.get());
        }
        if (rc != 0) {
            error_ = libfabric().strerror(-rc);
            return false;
        }
        e.key = fi_mr_key(mr.get());
        e.desc = fi_mr_desc(mr.get());
        e.backend_handle = mr.release();
        return true;
    }
    void deregister_region(CacheEntry& e) noexcept override {
        FidPtr<fid_mr> mr(static_cast<fid_mr*>(e.backend_handle));
        e.backend_handle = nullptr;
    }
    const std::string& error() const noexcept { return error_; }

  private:
    fid_domain* domain_ = nullptr;
    fid_ep* ep_ = nullptr;
    std::uint64_t mr_mode_ = 0;
    std::uint64_t next_key_ = 1;
    std::string error_;
};

// The toolkit's registration cache over exact ranges (no page rounding: a
// provider may register any range), any access.
class Rcache {
  public:
    // mr_mode: the provider's FI_MR_* requirements; keep_unused: registrations
    // kept after their last user released them, when `track_releases` and the
    // toolkit's MemoryReleaseMonitor works (else none: see unused_off_reason).
    void setup(fid_domain* domain, fid_ep* ep, std::uint64_t mr_mode, std::size_t keep_unused,
               bool track_releases) {
        backend_.setup(domain, ep, mr_mode);
        cache_.emplace(backend_, Cache::Config{.max_unused = keep_unused,
                                               .page_size = 1,
                                               .track_releases = track_releases});
    }
    // Why no registration is kept unused although some were asked for, or nullptr.
    const char* unused_off_reason() const noexcept {
        return cache_ ? cache_->unused_off_reason() : nullptr;
    }
    std::size_t unused() const noexcept { return cache_ ? cache_->unused() : 0; }

    // A registration covering [base, base + len), shared when one exists; counted.
    // Returns nullptr and sets `error` when libfabric refuses.
    CacheEntry* acquire(const void* base, std::size_t len, std::string* error) {
        CacheEntry* e = cache_ ? cache_->acquire(base, len == 0 ? 1 : len, 0) : nullptr;
        if (e == nullptr && error != nullptr) *error = backend_.error();
        return e;
    }
    void release(CacheEntry* e) { cache_->release(e); }
    void retain(CacheEntry* e) noexcept { cache_->retain(e); }
    // A registration covering the range, or nullptr; never registers.
    CacheEntry* find(const void* base, std::size_t len) noexcept {
        return cache_ ? cache_->find(base, len) : nullptr;
    }
    void clear() noexcept { cache_.reset(); }
    std::size_t size() const noexcept { return cache_ ? cache_->size() : 0; }

  private:
    using Cache = btl::util::RegistrationCache<OfiKeys>;
    MrBackend backend_;
    std::optional<Cache> cache_;  // after backend_: deregisters through it
};

}  // namespace transit::ofi
