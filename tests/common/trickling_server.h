// A fake Redis server that answers every command with a bulk string that never ends, sent one
// byte per `interval` (issue 33: a reply trickled so that each read returns within a per-read
// timeout, so that only a deadline on the whole command gives up on it). It listens on a loopback
// port the kernel picks, serves one connection at a time on a thread of its own, and stops when
// destroyed (closing the connection it is serving, which also releases a client that never gives
// up).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace stitch::testing {

class TricklingServer {
 public:
  explicit TricklingServer(std::chrono::milliseconds interval = std::chrono::milliseconds(100))
      : interval_(interval) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_, 16) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TricklingServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (listen_ >= 0) ::close(listen_);
  }
  TricklingServer(const TricklingServer&) = delete;
  TricklingServer& operator=(const TricklingServer&) = delete;

  bool ok() const { return port_ > 0; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      trickle(c);
      ::close(c);
    }
  }

  // Whatever the client sent is read and ignored; the reply is a bulk string a gigabyte long,
  // one byte per interval, until the client goes away or the server stops.
  void trickle(int c) {
    const std::string head = "$1000000000\r\n";
    for (size_t sent = 0; !stop_; ++sent) {
      char buf[4096];
      while (::recv(c, buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
      const char byte = sent < head.size() ? head[sent] : 'x';
      if (::send(c, &byte, 1, MSG_NOSIGNAL) != 1) return;
      for (auto waited = std::chrono::milliseconds(0); waited < interval_ && !stop_;
           waited += std::chrono::milliseconds(10))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::chrono::milliseconds interval_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

}  // namespace stitch::testing
