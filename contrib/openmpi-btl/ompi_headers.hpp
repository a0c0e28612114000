// The Open MPI 4.1 headers the adapter needs, in one place, and the proof that
// the values crossing the boundary need no translation: Transit's BTL contract
// was written after Open MPI's 3.1, so flags, atomic ops and segments match bit
// for bit.  Should a future Open MPI change one, the build stops here.
#pragma once

// Not every Open MPI header declares its C linkage (opal/util/proc.h does not).
// clang-format off
extern "C" {
#include "opal_config.h"
#include "opal/class/opal_bitmap.h"
#include "opal/constants.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
}
// clang-format on

#include <cstddef>

#include "transit/btl/types.hpp"

namespace transit::ompi {

namespace tb = transit::btl;

static_assert(MCA_BTL_FLAGS_SEND == tb::flags::send && MCA_BTL_FLAGS_PUT == tb::flags::put &&
                  MCA_BTL_FLAGS_GET == tb::flags::get &&
                  MCA_BTL_FLAGS_SEND_INPLACE == tb::flags::send_inplace &&
                  MCA_BTL_FLAGS_NEED_ACK == tb::flags::need_ack &&
                  MCA_BTL_FLAGS_NEED_CSUM == tb::flags::need_csum &&
                  MCA_BTL_FLAGS_RDMA_MATCHED == tb::flags::rdma_matched &&
                  MCA_BTL_FLAGS_RDMA_COMPLETION == tb::flags::rdma_completion &&
                  MCA_BTL_FLAGS_HETEROGENEOUS_RDMA == tb::flags::heterogeneous_rdma &&
                  MCA_BTL_FLAGS_FAILOVER_SUPPORT == tb::flags::failover_support &&
                  MCA_BTL_FLAGS_SIGNALED == tb::flags::signaled &&
                  MCA_BTL_FLAGS_ATOMIC_OPS == tb::flags::atomic_ops &&
                  MCA_BTL_FLAGS_ATOMIC_FOPS == tb::flags::atomic_fops &&
                  MCA_BTL_FLAGS_SINGLE_ADD_PROCS == tb::flags::single_add_procs &&
                  MCA_BTL_FLAGS_RDMA_FLUSH == tb::flags::rdma_flush,
              "module flags differ between Open MPI and Transit");

static_assert(MCA_BTL_ATOMIC_SUPPORTS_ADD == tb::atomic_support::add &&
                  MCA_BTL_ATOMIC_SUPPORTS_AND == tb::atomic_support::and_ &&
                  MCA_BTL_ATOMIC_SUPPORTS_OR == tb::atomic_support::or_ &&
                  MCA_BTL_ATOMIC_SUPPORTS_XOR == tb::atomic_support::xor_ &&
                  MCA_BTL_ATOMIC_SUPPORTS_LAND == tb::atomic_support::land &&
                  MCA_BTL_ATOMIC_SUPPORTS_LOR == tb::atomic_support::lor &&
                  MCA_BTL_ATOMIC_SUPPORTS_LXOR == tb::atomic_support::lxor &&
                  MCA_BTL_ATOMIC_SUPPORTS_SWAP == tb::atomic_support::swap &&
                  MCA_BTL_ATOMIC_SUPPORTS_MIN == tb::atomic_support::min &&
                  MCA_BTL_ATOMIC_SUPPORTS_MAX == tb::atomic_support::max &&
                  MCA_BTL_ATOMIC_SUPPORTS_32BIT == tb::atomic_support::bits32 &&
                  MCA_BTL_ATOMIC_SUPPORTS_FLOAT == tb::atomic_support::floating &&
                  MCA_BTL_ATOMIC_SUPPORTS_CSWAP == tb::atomic_support::cswap &&
                  MCA_BTL_ATOMIC_SUPPORTS_GLOB == tb::atomic_support::global,
              "atomic support flags differ between Open MPI and Transit");

static_assert(MCA_BTL_ATOMIC_ADD == static_cast<int>(tb::AtomicOp::add) &&
                  MCA_BTL_ATOMIC_AND == static_cast<int>(tb::AtomicOp::and_) &&
                  MCA_BTL_ATOMIC_OR == static_cast<int>(tb::AtomicOp::or_) &&
                  MCA_BTL_ATOMIC_XOR == static_cast<int>(tb::AtomicOp::xor_) &&
                  MCA_BTL_ATOMIC_LAND == static_cast<int>(tb::AtomicOp::land) &&
                  MCA_BTL_ATOMIC_LOR == static_cast<int>(tb::AtomicOp::lor) &&
                  MCA_BTL_ATOMIC_LXOR == static_cast<int>(tb::AtomicOp::lxor) &&
                  MCA_BTL_ATOMIC_SWAP == static_cast<int>(tb::AtomicOp::swap) &&
                  MCA_BTL_ATOMIC_MIN == static_cast<int>(tb::AtomicOp::min) &&
                  MCA_BTL_ATOMIC_MAX == static_cast<int>(tb::AtomicOp::max) &&
                  MCA_BTL_ATOMIC_FLAG_32BIT == tb::atomic_flags::bits32,
              "atomic operations differ between Open MPI and Transit");

static_assert(MCA_BTL_DES_FLAGS_PRIORITY == tb::des_flags::priority &&
                  MCA_BTL_DES_FLAGS_BTL_OWNERSHIP == tb::des_flags::btl_ownership &&
                  MCA_BTL_DES_SEND_ALWAYS_CALLBACK == tb::des_flags::send_always_callback &&
                  MCA_BTL_DES_FLAGS_PUT == tb::des_flags::put &&
                  MCA_BTL_DES_FLAGS_GET == tb::des_flags::get &&
                  MCA_BTL_DES_FLAGS_SIGNAL == tb::des_flags::signal,
              "descriptor flags differ between Open MPI and Transit");

static_assert(MCA_BTL_REG_FLAG_LOCAL_WRITE == tb::reg_flags::local_write &&
                  MCA_BTL_REG_FLAG_REMOTE_READ == tb::reg_flags::remote_read &&
                  MCA_BTL_REG_FLAG_REMOTE_WRITE == tb::reg_flags::remote_write &&
                  MCA_BTL_REG_FLAG_REMOTE_ATOMIC == tb::reg_flags::remote_atomic,
              "registration flags differ between Open MPI and Transit");

static_assert(MCA_BTL_ERROR_FLAGS_FATAL == tb::error_flags::fatal &&
                  MCA_BTL_ERROR_FLAGS_NONFATAL == tb::error_flags::nonfatal,
              "error flags differ between Open MPI and Transit");

static_assert(MCA_BTL_NO_ORDER == tb::no_order && MCA_BTL_TAG_PML == 0x40 &&
              MCA_BTL_DES_MAX_SEGMENTS == tb::max_segments &&
              MCA_BTL_REG_HANDLE_MAX_SIZE == tb::max_registration_handle_size);

// Segments are passed by pointer in both directions, never copied.
static_assert(sizeof(mca_btl_base_segment_t) == sizeof(tb::Segment) &&
              offsetof(mca_btl_base_segment_t, seg_addr) == offsetof(tb::Segment, addr) &&
              offsetof(mca_btl_base_segment_t, seg_len) == offsetof(tb::Segment, len) &&
              sizeof(opal_ptr_t) == sizeof(void*));

// Transit's status codes keep their Open MPI meaning; only the numbers of the
// errors differ.
constexpr int to_opal(Status s) noexcept {
    switch (s) {
        case Status::completed:
            return 1;
        case Status::success:
            return OPAL_SUCCESS;
        case Status::out_of_resource:
            return OPAL_ERR_OUT_OF_RESOURCE;
        case Status::not_available:
            return OPAL_ERR_NOT_AVAILABLE;
        case Status::unreachable:
            return OPAL_ERR_UNREACH;
        case Status::bad_param:
            return OPAL_ERR_BAD_PARAM;
        case Status::not_found:
            return OPAL_ERR_NOT_FOUND;
        case Status::not_supported:
            return OPAL_ERR_NOT_SUPPORTED;
        case Status::truncated:
            return OPAL_ERR_VALUE_OUT_OF_BOUNDS;
        case Status::timeout:
            return OPAL_ERR_TIMEOUT;
        case Status::peer_failed:
            return OPAL_ERR_UNREACH;
        case Status::exists:
            return OPAL_EXISTS;
        case Status::access_denied:
            return OPAL_ERR_PERM;
        default:
            return OPAL_ERROR;
    }
}

}  // namespace transit::ompi
