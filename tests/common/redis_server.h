// A real redis-server of the tests' own, on a loopback port, for the remote cache layer's tests
// (runtime/remote_cache.h). scripts/setup.sh installs Debian's redis-server; where it is missing
// or cannot start, start() says why and the tests skip with that message.
//
// The server keeps nothing on disk (--save "" --appendonly no) and listens on 127.0.0.1 only, on
// a port the kernel picked as free just before. kill() ends it with SIGKILL (a server that goes
// away mid-run, with no goodbye on its connections); restart() starts it again on the same port.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace stitch::testing {

class RedisServer {
 public:
  // A running server, or null with *why set.
  static std::unique_ptr<RedisServer> start(std::string* why) {
    const int port = freePort();
    if (port <= 0) {
      *why = "no free loopback port";
      return nullptr;
    }
    auto s = std::unique_ptr<RedisServer>(new RedisServer(port));
    if (!s->launch(why)) return nullptr;
    return s;
  }

  ~RedisServer() { kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // Ends the server at once (SIGKILL) and reaps it.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // Starts it again on the same port (empty: it kept nothing).
  bool restart(std::string* why) {
    kill();
    return launch(why);
  }

  // One command's raw reply, sent over a plain socket: the tests' view of the server, independent
  // of the client the library uses. Arguments are sent as a RESP array, so any bytes may pass.
  std::string command(const std::vector<std::string>& args) const {
    int fd = connectTo(port_);
    if (fd < 0) return {};
    std::string req = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args) req += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    std::string reply;
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      // A reply is complete when it parses; a short wait for the rest of a large bulk string.
      for (int tries = 0; tries < 200 && !complete(reply); ++tries) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        reply.append(buf, static_cast<size_t>(n));
      }
    }
    ::close(fd);
    return reply;
  }

  // The value of a key (GET), or nullopt-like empty with *found false.
  std::string get(const std::string& key, bool* found) const {
    std::string r = command({"GET", key});
    *found = r.size() > 1 && r[0] == '$' && r.rfind("$-1", 0) != 0;
    if (!*found) return {};
    size_t eol = r.find("\r\n");
    return r.substr(eol + 2, std::stoul(r.substr(1, eol - 1)));
  }
  bool set(const std::string& key, const std::string& value) const {
    return command({"SET", key, value}).rfind("+OK", 0) == 0;
  }
  long long integer(const std::vector<std::string>& args) const {
    std::string r = command(args);
    return r.size() > 1 && r[0] == ':' ? std::stoll(r.substr(1)) : -999;
  }

 private:
  explicit RedisServer(int port) : port_(port) {}

  static int freePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
    return port;
  }

  static int connectTo(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Whether a RESP reply is whole (the simple kinds, and one bulk string).
  static bool complete(const std::string& r) {
    size_t eol = r.find("\r\n");
    if (eol == std::string::npos) return false;
    if (r[0] != '$') return true;
    long long n = std::stoll(r.substr(1, eol - 1));
    return n < 0 || r.size() >= eol + 2 + static_cast<size_t>(n) + 2;
  }

  bool launch(std::string* why) {
    const std::string port = std::to_string(port_);
    // Quiet, on loopback, keeping nothing on disk. Made before fork(): the child of a process
    // with threads may only call async-signal-safe functions (no malloc) before exec.
    std::vector<const char*> argv = {
        "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",  "--save",  "",
        "--appendonly", "no",     "--dir",      "/tmp",   "--loglevel", "warning", nullptr};
    pid_ = ::fork();
    if (pid_ < 0) {
      *why = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid_ == 0) {
      // Its start-up banner and warnings are not the test's output.
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, 1);
        ::dup2(null, 2);
      }
      ::execvp("redis-server", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    for (int i = 0; i < 250; ++i) {  // up to 5 s
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *why = WIFEXITED(status) && WEXITSTATUS(status) == 127
                   ? "redis-server is not installed (Debian: redis-server; scripts/setup.sh)"
                   : "redis-server exited at start";
        return false;
      }
      if (command({"PING"}).rfind("+PONG", 0) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *why = "redis-server did not answer PING within 5 s";
    kill();
    return false;
  }

  int port_;
  pid_t pid_ = -1;
};

}  // namespace stitch::testing
