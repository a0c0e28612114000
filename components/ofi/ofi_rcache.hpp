// Memory registration for the ofi module: RAII for libfabric objects, the
// packed handle peers receive, and a small registration cache.
//
// Every region is registered with all access rights, so one registration serves
// any later request that falls inside it; the rights the caller asked for are
// carried in the packed handle and checked by the initiator before it issues
// an operation, as are the bounds the caller registered (not the possibly
// larger cached region).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "transit/btl/types.hpp"

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
    T* operator->() const noexcept { return p_; }
    T** out() noexcept {
        reset();
        return &p_;
    }
    explicit operator bool() const noexcept { return p_ != nullptr; }

  private:
    T* p_ = nullptr;
};

// The packed (remote) form of a registration: what a peer copies and passes
// back as the remote handle.
struct PackedHandle {
    std::uint64_t key;      // the memory region's key
    std::uint64_t mr_base;  // start of the registered region (offset addressing)
    std::uint64_t base;     // the bounds the owner registered
    std::uint64_t len;
    std::uint32_t access;  // btl::reg_flags
    std::uint32_t magic;
    // Which provider's domain the key belongs to (name_hash of its name): each
    // provider's module registers a region on its own, and a key is only valid
    // in the domain that issued it.
    std::uint64_t provider;
};
inline constexpr std::uint32_t handle_magic = 0x4f464931;  // "OFI1"

// Reads a handle that may have been copied to an unaligned place.
inline bool unpack(const btl::RegistrationHandle* h, PackedHandle& out) noexcept {
    if (h == nullptr) return false;
    std::memcpy(&out, h, sizeof out);
    return out.magic == handle_magic;
}

struct CacheEntry {
    FidPtr<fid_mr> mr;
    std::uint64_t base = 0;
    std::uint64_t len = 0;
    std::uint64_t key = 0;
    void* desc = nullptr;
    int refs = 0;
    std::uint64_t last_use = 0;
};

// What register_mem returns: the packed form first, as the contract requires.
struct OfiRegistration {
    PackedHandle packed;
    CacheEntry* entry;
};

class Rcache {
  public:
    Rcache() = default;
    Rcache(const Rcache&) = delete;
    Rcache& operator=(const Rcache&) = delete;
    ~Rcache() { clear(); }

    // mr_mode: the provider's FI_MR_* requirements; keep_unused: registrations
    // kept after their last user released them.
    void setup(fid_domain* domain, fid_ep* ep, std::uint64_t mr_mode, std::size_t keep_unused) {
        domain_ = domain;
        ep_ = ep;
        mr_mode_ = mr_mode;
        keep_unused_ = keep_unused;
    }

    // A registration covering [base, base + len), shared when one exists; counted.
    // Returns nullptr and sets `error` when libfabric refuses.
    CacheEntry* acquire(const void* base, std::size_t len, std::string* error) {
        if (CacheEntry* e = find(base, len)) {
            ++e->refs;
            return e;
        }
        auto e = std::make_unique<CacheEntry>();
        const std::uint64_t requested_key = (mr_mode_ & FI_MR_PROV_KEY) ? 0 : next_key_++;
        constexpr std::uint64_t access =
            FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        int rc = fi_mr_reg(domain_, base, len == 0 ? 1 : len, access, 0, requested_key, 0,
                           e->mr.out(), nullptr);
        if (rc == 0 && (mr_mode_ & FI_MR_ENDPOINT)) {
            rc = fi_mr_bind(e->mr.get(), &ep_->fid, 0);
            if (rc == 0) rc = fi_mr_enable(e->mr.get());
        }
        if (rc != 0) {
            if (error) *error = fi_strerror(-rc);
            return nullptr;
        }
        e->base = reinterpret_cast<std::uintptr_t>(base);
        e->len = len;
        e->key = fi_mr_key(e->mr.get());
        e->desc = fi_mr_desc(e->mr.get());
        e->refs = 1;
        e->last_use = ++clock_;
        entries_.push_back(std::move(e));
        return entries_.back().get();
    }

    void release(CacheEntry* e) {
        if (--e->refs > 0) return;
        e->last_use = ++clock_;
        trim();
    }

    // A registration covering the range, or nullptr; never registers.
    CacheEntry* find(const void* base, std::size_t len) noexcept {
        const auto b = reinterpret_cast<std::uintptr_t>(base);
        for (auto& e : entries_) {
            if (b >= e->base && len <= e->len && b - e->base <= e->len - len) {
                e->last_use = ++clock_;
                return e.get();
            }
        }
        return nullptr;
    }

    void clear() noexcept { entries_.clear(); }
    std::size_t size() const noexcept { return entries_.size(); }

  private:
    // Closes the least recently used unreferenced registrations beyond keep_unused_.
    void trim() {
        std::size_t unused = 0;
        for (auto& e : entries_) unused += e->refs == 0;
        while (unused > keep_unused_) {
            auto victim = entries_.end();
            for (auto it = entries_.begin(); it != entries_.end(); ++it)
                if ((*it)->refs == 0 &&
                    (victim == entries_.end() || (*it)->last_use < (*victim)->last_use))
                    victim = it;
            entries_.erase(victim);
            --unused;
        }
    }

    fid_domain* domain_ = nullptr;
    fid_ep* ep_ = nullptr;
    std::uint64_t mr_mode_ = 0;
    std::size_t keep_unused_ = 16;
    std::uint64_t next_key_ = 1;
    std::uint64_t clock_ = 0;
    std::vector<std::unique_ptr<CacheEntry>> entries_;
};

}  // namespace transit::ofi
