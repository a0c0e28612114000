// A clean parameter world per test: HOME and the system file point into a
// fresh temporary directory, no TRANSIT_MCA_* variable is inherited, and the
// registry is rebuilt from scratch.  Also the checks on error messages that
// the parameter tests share.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "params/registry_impl.hpp"
#include "transit/params.hpp"

extern char** environ;

namespace transit::params::test {

// The message of the Error that `f` throws, or "" when it throws none.
std::string error_text(auto&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

inline void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
    for (const std::string& p : parts)
        EXPECT_NE(text.find(p), std::string::npos) << "missing \"" << p << "\" in: " << text;
}

class ParamsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "transit-params-XXXXXX").string();
        ASSERT_NE(mkdtemp(pattern.data()), nullptr);
        dir_ = pattern;
        save_env("HOME");
        ::setenv("HOME", dir_.c_str(), 1);
        for (char** e = environ; *e != nullptr; ++e) {
            std::string entry(*e);
            if (entry.starts_with("TRANSIT_MCA_"))
                inherited_.push_back(entry.substr(0, entry.find('=')));
        }
        for (const std::string& name : inherited_) {
            save_env(name);
            ::unsetenv(name.c_str());
        }
        system_file_ = (dir_ / "etc" / "transit-mca-params.conf").string();
        set_system_file_for_testing(system_file_);
        reset_for_testing();
    }

    void TearDown() override {
        reset_for_testing();
        set_system_file_for_testing("");
        for (auto& [name, value] : saved_env_) {
            if (value)
                ::setenv(name.c_str(), value->c_str(), 1);
            else
                ::unsetenv(name.c_str());
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    // Writes `content` to `relative` under the temporary directory; returns the path.
    std::string write_file(const std::string& relative, const std::string& content) {
        std::filesystem::path p = dir_ / relative;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p) << content;
        return p.string();
    }
    std::string write_system_file(const std::string& content) {
        return write_file("etc/transit-mca-params.conf", content);
    }
    std::string write_user_file(const std::string& content) {
        return write_file(".transit/mca-params.conf", content);
    }

    // Sets TRANSIT_MCA_<name> for this test only.
    void set_env(const std::string& name, const std::string& value) {
        std::string var = "TRANSIT_MCA_" + name;
        save_env(var);
        ::setenv(var.c_str(), value.c_str(), 1);
    }

    // Runs parse_command_line on a real argv; returns what is left of it.
    std::vector<std::string> command_line(std::vector<std::string> args) {
        args.insert(args.begin(), "prog");
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        int argc = static_cast<int>(args.size());
        parse_command_line(argc, argv.data());
        EXPECT_EQ(argv[static_cast<std::size_t>(argc)], nullptr);
        return {argv.begin() + 1, argv.begin() + argc};
    }

    std::filesystem::path dir_;
    std::string system_file_;

  private:
    void save_env(const std::string& name) {
        if (saved_env_.count(name)) return;
        const char* v = ::getenv(name.c_str());
        saved_env_[name] = v ? std::optional<std::string>(v) : std::nullopt;
    }

    std::vector<std::string> inherited_;
    std::map<std::string, std::optional<std::string>> saved_env_;
};

}  // namespace transit::params::test
