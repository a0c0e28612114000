// Credit-based flow control over a shared receive queue.
//
// Receives come from one SRQ per module, so a sender must never have more
// messages in flight to us than we hold receive buffers for it; otherwise the
// HCA answers with receiver-not-ready and the whole QP stalls or fails.  The
// scheme:
//
//   - At connection time each side grants the other D data credits and one
//     control credit, and reserves D + 1 SRQ slots for it (SrqBudget).  The
//     sum of all reservations never exceeds the SRQ size, so the SRQ cannot
//     overflow whatever the peers do.
//   - Every fragment sent (data, atomic request or reply) costs one data credit.
//     When the receiver has consumed a fragment and reposted its buffer, it owes
//     the sender one credit back; owed credits ride on every fragment it sends
//     (FragHeader::credits).
//   - A receiver with nothing to send returns credits in a credit-only message
//     once it owes at least half the grant.  Such a message costs the sender's
//     single control credit, which comes back on the peer's next fragment
//     (frag_flags::returns_control).  A credit-only message is never sent just
//     to return a control credit, so two idle peers never ping-pong.  Its
//     buffer goes back to the SRQ in the same completion that delivered it, so
//     the control credit is owed before anything else can be sent.
//
// Why it cannot deadlock: a sender blocked at zero credits has all D of its
// fragments outstanding at the receiver, so the receiver eventually owes D >=
// threshold credits.  If its control credit is out, that credit-only message
// has reached (or will reach) the blocked sender and raised its credits above
// zero; the sender's next fragment returns the control credit.
//
// These classes are plain counters: no verbs, no allocation, testable alone.
#pragma once

#include <algorithm>
#include <cstdint>

namespace transit::openib {

// What one connection may send and what it owes back.
class CreditAccount {
  public:
    CreditAccount() = default;

    // `granted_to_us`: data credits the peer gave us.  `granted_to_peer`: data
    // credits we gave the peer (and reserved SRQ slots for).
    void start(std::uint32_t granted_to_us, std::uint32_t granted_to_peer) noexcept {
        send_credits_ = granted_to_us;
        send_limit_ = granted_to_us;
        control_credits_ = 1;
        grant_ = granted_to_peer;
        pending_returns_ = 0;
        owe_control_ = false;
        peer_outstanding_ = 0;
    }

    // --- sending ------------------------------------------------------------
    std::uint32_t send_credits() const noexcept { return send_credits_; }
    bool control_credit_available() const noexcept { return control_credits_ > 0; }

    // Takes one data credit; false when none is left (the fragment must wait).
    bool take_data_credit() noexcept {
        if (send_credits_ == 0) return false;
        --send_credits_;
        return true;
    }
    // Gives back a credit taken for a fragment that was never posted.
    void untake_data_credit() noexcept { ++send_credits_; }

    struct Piggyback {
        std::uint16_t credits = 0;
        bool returns_control = false;
    };
    // What the next outgoing fragment carries back to the peer; clears it.
    Piggyback take_piggyback() noexcept {
        Piggyback p;
        p.credits = static_cast<std::uint16_t>(std::min<std::uint32_t>(pending_returns_, 0xffff));
        pending_returns_ -= p.credits;
        p.returns_control = owe_control_;
        owe_control_ = false;
        return p;
    }
    // Undoes take_piggyback when the fragment could not be posted.
    void restore_piggyback(const Piggyback& p) noexcept {
        pending_returns_ += p.credits;
        owe_control_ = owe_control_ || p.returns_control;
    }

    // True when a credit-only message should go out now.
    bool credit_message_due() const noexcept {
        return control_credits_ > 0 && pending_returns_ >= threshold();
    }
    // Spends the control credit for a credit-only message; false if it is out.
    bool take_control_credit() noexcept {
        if (control_credits_ == 0) return false;
        --control_credits_;
        return true;
    }
    void untake_control_credit() noexcept { ++control_credits_; }

    // --- receiving ------------------------------------------------------------
    // Applies the credits a received header carries.  False for a protocol
    // violation: the peer returned more than we ever had outstanding.
    bool on_header(std::uint16_t credits, bool returns_control) noexcept {
        if (send_credits_ + credits > send_limit_) return false;
        if (returns_control && control_credits_ != 0) return false;
        send_credits_ += credits;
        if (returns_control) control_credits_ = 1;
        return true;
    }
    // A fragment from the peer arrived and holds one of our receive buffers.
    // False when the peer sent beyond its grant (it ignored flow control).
    bool on_arrival(bool credit_only) noexcept {
        if (credit_only) {
            if (control_outstanding_) return false;
            control_outstanding_ = true;
            return true;
        }
        if (peer_outstanding_ >= grant_) return false;
        ++peer_outstanding_;
        return true;
    }
    // The buffer of a fragment was reposted: we now owe its credit back.
    void on_buffer_reposted(bool credit_only) noexcept {
        if (credit_only) {
            control_outstanding_ = false;
            owe_control_ = true;
            return;
        }
        --peer_outstanding_;
        ++pending_returns_;
    }

    std::uint32_t pending_returns() const noexcept { return pending_returns_; }
    bool owes_control() const noexcept { return owe_control_; }
    std::uint32_t grant() const noexcept { return grant_; }
    std::uint32_t threshold() const noexcept { return std::max<std::uint32_t>(1, grant_ / 2); }

  private:
    std::uint32_t send_credits_ = 0;
    std::uint32_t send_limit_ = 0;
    std::uint32_t control_credits_ = 0;
    std::uint32_t grant_ = 0;
    std::uint32_t pending_returns_ = 0;
    std::uint32_t peer_outstanding_ = 0;  // peer fragments holding our buffers
    bool owe_control_ = false;
    bool control_outstanding_ = false;
};

// How many SRQ slots are promised to connected peers.  Each connection takes
// its data grant plus one control slot; the module posts receive buffers until
// `posted` covers `reserved`.
class SrqBudget {
  public:
    explicit SrqBudget(std::uint32_t capacity = 0) noexcept : capacity_(capacity) {}

    // Reserves room for a new connection and returns the data credits to grant
    // it (at most `wanted`), or 0 when not even one data slot plus the control
    // slot is left: the connection must then be refused.
    std::uint32_t reserve(std::uint32_t wanted) noexcept {
        std::uint32_t free = capacity_ - reserved_;
        if (free < 2 || wanted == 0) return 0;
        std::uint32_t grant = std::min(wanted, free - 1);
        reserved_ += grant + 1;
        return grant;
    }
    void release(std::uint32_t grant) noexcept { reserved_ -= std::min(reserved_, grant + 1); }

    std::uint32_t capacity() const noexcept { return capacity_; }
    std::uint32_t reserved() const noexcept { return reserved_; }

  private:
    std::uint32_t capacity_;
    std::uint32_t reserved_ = 0;
};

// Send-queue slots of one QP: a work request may be posted only while one is free.
class SendSlots {
  public:
    explicit SendSlots(std::uint32_t depth = 0) noexcept : free_(depth), depth_(depth) {}
    bool take() noexcept {
        if (free_ == 0) return false;
        --free_;
        return true;
    }
    void give() noexcept {
        if (free_ < depth_) ++free_;
    }
    std::uint32_t free() const noexcept { return free_; }
    std::uint32_t in_flight() const noexcept { return depth_ - free_; }

  private:
    std::uint32_t free_;
    std::uint32_t depth_;
};

}  // namespace transit::openib
