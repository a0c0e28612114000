// Small RAII helpers over the PMIx C API, shared by the client runtime and the
// transit_run launcher (which is a PMIx server).
#pragma once

#include <pmix.h>

#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace transit::rt::pmix {

// Job-level key transit_run sets: a fence over the whole job (the wildcard)
// completes among the survivors once a rank is lost.  Ranks then keep fencing
// over the wildcard: survivors learn of a loss at different moments, and a
// fence named by survivors would not match a wildcard one still in flight.
inline constexpr char wildcard_fence_survives_loss[] = "transit.fence.survives_loss";

struct ValueDeleter {
    void operator()(pmix_value_t* v) const noexcept {
        PMIx_Value_destruct(v);
        pmix_free(v);
    }
};
using ValuePtr = std::unique_ptr<pmix_value_t, ValueDeleter>;

inline pmix_proc_t make_proc(std::string_view nspace, pmix_rank_t rank) {
    pmix_proc_t p;
    PMIX_PROC_CONSTRUCT(&p);
    const std::size_t n = nspace.size() < PMIX_MAX_NSLEN ? nspace.size() : PMIX_MAX_NSLEN;
    nspace.copy(p.nspace, n);
    p.rank = rank;
    return p;
}

// An array of pmix_info_t built key by key; PMIx copies every value it is given,
// so the caller's data may go away after add().
class InfoList {
  public:
    InfoList() : list_(PMIx_Info_list_start()) {}
    ~InfoList() {
        if (converted_) PMIx_Data_array_destruct(&array_);
        PMIx_Info_list_release(list_);
    }
    InfoList(const InfoList&) = delete;
    InfoList& operator=(const InfoList&) = delete;

    InfoList& add(const char* key, const void* value, pmix_data_type_t type) {
        const pmix_status_t rc = PMIx_Info_list_add(list_, key, value, type);
        if (rc != PMIX_SUCCESS)
            throw std::runtime_error(std::string("cannot add PMIx info ") + key + ": " +
                                     PMIx_Error_string(rc));
        return *this;
    }
    InfoList& add_string(const char* key, const std::string& value) {
        return add(key, value.c_str(), PMIX_STRING);
    }
    InfoList& add_u32(const char* key, std::uint32_t value) {
        return add(key, &value, PMIX_UINT32);
    }
    InfoList& add_u16(const char* key, std::uint16_t value) {
        return add(key, &value, PMIX_UINT16);
    }
    InfoList& add_bool(const char* key, bool value) { return add(key, &value, PMIX_BOOL); }
    InfoList& add_bytes(const char* key, std::span<const std::byte> bytes) {
        pmix_byte_object_t bo;
        PMIX_BYTE_OBJECT_CONSTRUCT(&bo);
        // PMIx copies the bytes; the cast only satisfies its non-const field.
        bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
        bo.size = bytes.size();
        return add(key, &bo, PMIX_BYTE_OBJECT);
    }
    // Nests another list as a PMIX_DATA_ARRAY value (e.g. per-process data).
    InfoList& add_array(const char* key, InfoList& inner) {
        pmix_data_array_t arr = inner.to_array();
        return add(key, &arr, PMIX_DATA_ARRAY);
    }

    // The finished array; valid until this list is destroyed.
    std::span<pmix_info_t> finish() {
        pmix_data_array_t arr = to_array();
        return {static_cast<pmix_info_t*>(arr.array), arr.size};
    }

  private:
    pmix_data_array_t to_array() {
        if (converted_) PMIx_Data_array_destruct(&array_);
        PMIX_DATA_ARRAY_CONSTRUCT(&array_, 0, PMIX_INFO);
        const pmix_status_t rc = PMIx_Info_list_convert(list_, &array_);
        if (rc != PMIX_SUCCESS && rc != PMIX_ERR_EMPTY)
            throw std::runtime_error(std::string("cannot build a PMIx info array: ") +
                                     PMIx_Error_string(rc));
        converted_ = true;
        return array_;
    }

    void* list_;
    pmix_data_array_t array_{};
    bool converted_ = false;
};

// One PMIx callback waited for with a limit: a PMIx thread that stops answering
// must not hold the caller.  The callback may then come after the caller gave
// up, so this state, and the payload PMIx may read until it calls back, are
// owned jointly by the caller and by the cbdata handed to PMIx.
template <class Payload = std::monostate>
class Completion {
  public:
    // Owned with the state: what PMIx reads until its callback, or what the
    // callback fills for the caller.  The caller's alone again once wait_for()
    // returned a status.
    Payload payload{};

    // The cbdata for one PMIx call: one more owner, given up by complete().
    // A C void* carries only a plain pointer, so that owner is a shared_ptr
    // copy on the heap, held raw only while PMIx holds it: complete() takes
    // it back at once.
    static void* to_cbdata(const std::shared_ptr<Completion>& self) {
        return std::make_unique<std::shared_ptr<Completion>>(self).release();
    }

    // From PMIx's callback, or at once when PMIx refused the call (no callback
    // comes then): records `status`, lets `fill` store the callback's results
    // in the payload, wakes the waiter and gives up the cbdata's ownership.
    template <std::invocable<Payload&> Fill>
    static void complete(void* cbdata, pmix_status_t status, Fill&& fill) noexcept {
        // Declared before the lock, so the last owner unlocks before it destroys.
        const std::unique_ptr<std::shared_ptr<Completion>> owner(
            static_cast<std::shared_ptr<Completion>*>(cbdata));
        Completion& self = **owner;
        std::lock_guard lock(self.mutex_);
        std::forward<Fill>(fill)(self.payload);
        self.status_ = status;
        self.done_ = true;
        self.cv_.notify_all();
    }
    static void complete(void* cbdata, pmix_status_t status) noexcept {
        complete(cbdata, status, [](Payload&) noexcept {});
    }

    // The callback's status, or nothing when it did not come within `limit`.
    template <class Rep, class Period>
    std::optional<pmix_status_t> wait_for(std::chrono::duration<Rep, Period> limit) {
        std::unique_lock lock(mutex_);
        if (!cv_.wait_for(lock, limit, [this] { return done_; })) return std::nullopt;
        return status_;
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    pmix_status_t status_ = PMIX_SUCCESS;
};

}  // namespace transit::rt::pmix
