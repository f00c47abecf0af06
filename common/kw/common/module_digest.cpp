#include "kw/common/module_digest.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "kw/common/sha256.hpp"

namespace kw::common {

namespace {

constexpr std::uint32_t kShtSymtab = 2, kShtRela = 4, kShtNobits = 8, kShtRel = 9, kShtNote = 7;
constexpr unsigned kSttFunc = 2;
constexpr unsigned kStoCudaEntry = 0x10;
// .nv.info attribute formats and those whose first word is a symbol index
// (EIATTR_PARAM_CBANK, FRAME_SIZE, MIN_STACK_SIZE, MAX_STACK_SIZE, REGCOUNT).
constexpr std::uint8_t kEifmtSval = 4;
const std::set<std::uint8_t> kSymbolAttributes{0x0a, 0x11, 0x12, 0x23, 0x2f};

struct Section {
  std::string name;
  std::uint32_t type = 0, link = 0, info = 0;
  std::uint64_t flags = 0, address = 0, offset = 0, size = 0, entsize = 0;
};

struct Symbol {
  std::string name;
  unsigned char info = 0, other = 0;
  std::uint16_t section = 0;
  std::uint64_t value = 0, size = 0;
};

// Bounds-checked reads of a little-endian ELF64 image; a read past the end
// throws, and the image is then digested whole.
class Image {
 public:
  explicit Image(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T read(std::uint64_t at) const {
    if (at > bytes_.size() || sizeof(T) > bytes_.size() - at) throw std::out_of_range("past the image's end");
    T value;
    std::memcpy(&value, bytes_.data() + at, sizeof(T));
    return value;
  }
  std::string_view slice(std::uint64_t at, std::uint64_t size) const {
    if (at > bytes_.size() || size > bytes_.size() - at) throw std::out_of_range("past the image's end");
    return bytes_.substr(at, size);
  }
  std::string cstring(std::uint64_t at) const {
    if (at >= bytes_.size()) throw std::out_of_range("a name past the image's end");
    const std::size_t end = bytes_.find('\0', at);
    if (end == std::string_view::npos) throw std::out_of_range("an unterminated name");
    return std::string(bytes_.substr(at, end - at));
  }

 private:
  std::string_view bytes_;
};

// Each field with its length first, so that two fields never read as one.
void add(Sha256& hash, std::string_view field) {
  const std::uint64_t size = field.size();
  hash.update(std::string_view(reinterpret_cast<const char*>(&size), sizeof size));
  hash.update(field);
}
void add(Sha256& hash, std::uint64_t value) {
  hash.update(std::string_view(reinterpret_cast<const char*>(&value), sizeof value));
}

struct Elf {
  std::uint32_t flags = 0;
  std::uint16_t machine = 0;
  std::vector<Section> sections;
  std::vector<Symbol> symbols;
};

Elf parse(const Image& image) {
  Elf elf;
  elf.machine = image.read<std::uint16_t>(18);
  elf.flags = image.read<std::uint32_t>(48);
  const auto shoff = image.read<std::uint64_t>(40);
  const auto shentsize = image.read<std::uint16_t>(58);
  const auto shnum = image.read<std::uint16_t>(60);
  const auto shstrndx = image.read<std::uint16_t>(62);
  if (shentsize != 64) throw std::runtime_error("section headers of an unexpected size");
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t at = shoff + i * 64;
    Section s;
    s.name = std::to_string(image.read<std::uint32_t>(at));  // resolved below
    s.type = image.read<std::uint32_t>(at + 4);
    s.flags = image.read<std::uint64_t>(at + 8);
    s.address = image.read<std::uint64_t>(at + 16);
    s.offset = image.read<std::uint64_t>(at + 24);
    s.size = image.read<std::uint64_t>(at + 32);
    s.link = image.read<std::uint32_t>(at + 40);
    s.info = image.read<std::uint32_t>(at + 44);
    s.entsize = image.read<std::uint64_t>(at + 56);
    elf.sections.push_back(std::move(s));
  }
  if (shstrndx >= elf.sections.size()) throw std::runtime_error("no section name table");
  const std::uint64_t names = elf.sections[shstrndx].offset;
  for (Section& s : elf.sections) s.name = image.cstring(names + std::stoull(s.name));
  for (const Section& s : elf.sections) {
    if (s.type != kShtSymtab) continue;
    if (s.link >= elf.sections.size()) throw std::runtime_error("a symbol table without its names");
    const std::uint64_t strings = elf.sections[s.link].offset;
    for (std::uint64_t at = s.offset; at + 24 <= s.offset + s.size; at += 24) {
      Symbol symbol;
      symbol.name = image.cstring(strings + image.read<std::uint32_t>(at));
      symbol.info = image.read<unsigned char>(at + 4);
      symbol.other = image.read<unsigned char>(at + 5);
      symbol.section = image.read<std::uint16_t>(at + 6);
      symbol.value = image.read<std::uint64_t>(at + 8);
      symbol.size = image.read<std::uint64_t>(at + 16);
      elf.symbols.push_back(std::move(symbol));
    }
  }
  return elf;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

bool ignored(const Section& s) {
  return s.type == 0 || s.type == kShtSymtab || s.type == kShtNote || s.name == ".shstrtab" ||
         s.name == ".strtab" || s.name.find("debug") != std::string::npos || s.name == ".nv.callgraph" ||
         s.name == ".nv.prototype" || s.name == ".nv.info";
}

class CubinDigester {
 public:
  CubinDigester(const Image& image, Elf elf) : image_(image), elf_(std::move(elf)) {}

  std::map<std::string, std::string> digests() {
    std::set<std::string> kernels;
    for (const Symbol& symbol : elf_.symbols) {
      if ((symbol.info & 0xf) == kSttFunc && (symbol.other & kStoCudaEntry) != 0) kernels.insert(symbol.name);
    }
    Sha256 shared;  // what every kernel of the module sees
    add(shared, elf_.machine);
    // The architecture; the top byte moves with -lineinfo and -G, which the
    // code sections show where they change the code.
    add(shared, elf_.flags & 0x00ffffffU);
    for (const Section& s : elf_.sections) {
      if (ignored(s) || owner(s, kernels) != nullptr) continue;
      section(shared, s, s.name);
    }
    const std::string shared_digest = shared.hex();
    std::map<std::string, std::string> out;
    for (const std::string& kernel : kernels) {
      Sha256 hash;
      add(hash, shared_digest);
      for (const Section& s : elf_.sections) {
        if (ignored(s) || !ends_with(s.name, "." + kernel)) continue;
        section(hash, s, s.name.substr(0, s.name.size() - kernel.size()));
      }
      global_attributes(hash, kernel);
      out[kernel] = hash.hex();
    }
    return out;
  }

 private:
  static const std::string* owner(const Section& s, const std::set<std::string>& kernels) {
    const std::size_t dot = s.name.rfind('.');
    if (dot == std::string::npos) return nullptr;
    // Names of kernels never hold a dot; a kernel's sections end in it.
    for (std::size_t start = s.name.find('.', 1); start != std::string::npos;
         start = s.name.find('.', start + 1)) {
      auto it = kernels.find(s.name.substr(start + 1));
      if (it != kernels.end()) return &*it;
    }
    return nullptr;
  }

  std::string symbol_name(std::uint64_t index) const {
    return index < elf_.symbols.size() ? elf_.symbols[index].name : "#" + std::to_string(index);
  }

  void section(Sha256& hash, const Section& s, const std::string& name) const {
    add(hash, name);
    add(hash, s.type);
    add(hash, s.flags);
    add(hash, s.size);
    if (s.type == kShtNobits) return;
    if (s.type == kShtRela || s.type == kShtRel) {
      const std::uint64_t entry = s.type == kShtRela ? 24 : 16;
      for (std::uint64_t at = s.offset; at + entry <= s.offset + s.size; at += entry) {
        add(hash, image_.read<std::uint64_t>(at));
        const auto info = image_.read<std::uint64_t>(at + 8);
        add(hash, info & 0xffffffffU);
        add(hash, symbol_name(info >> 32));
        if (entry == 24) add(hash, image_.read<std::uint64_t>(at + 16));
      }
      return;
    }
    if (s.name.starts_with(".nv.info.")) {
      attributes(s, [&](std::uint8_t, std::optional<std::uint32_t>, std::string_view record) {
        add(hash, record);
        return true;
      });
      return;
    }
    add(hash, image_.slice(s.offset, s.size));
  }

  // Each record of an attribute section, its symbol index (if it has one)
  // replaced by the symbol's name.
  template <typename Visit>
  void attributes(const Section& s, Visit&& visit) const {
    const std::string_view bytes = image_.slice(s.offset, s.size);
    for (std::size_t at = 0; at + 4 <= bytes.size();) {
      const auto format = static_cast<std::uint8_t>(bytes[at]);
      const auto attribute = static_cast<std::uint8_t>(bytes[at + 1]);
      std::uint16_t size = 0;
      std::memcpy(&size, bytes.data() + at + 2, 2);
      const std::size_t length = format == kEifmtSval ? 4 + std::size_t{size} : 4;
      if (at + length > bytes.size()) throw std::out_of_range("an attribute past its section's end");
      std::string record(bytes.substr(at, length));
      std::optional<std::uint32_t> symbol;
      if (format == kEifmtSval && size >= 4 && kSymbolAttributes.contains(attribute)) {
        std::uint32_t index = 0;
        std::memcpy(&index, record.data() + 4, 4);
        symbol = index;
        record = record.substr(0, 4) + symbol_name(index) + record.substr(8);
      }
      visit(attribute, symbol, record);
      at += length;
    }
  }

  // The module-wide attribute table's records of this kernel (its registers,
  // stack) and those of no kernel.
  void global_attributes(Sha256& hash, const std::string& kernel) const {
    for (const Section& s : elf_.sections) {
      if (s.name != ".nv.info") continue;
      attributes(s, [&](std::uint8_t, std::optional<std::uint32_t> symbol, std::string_view record) {
        if (symbol) {
          if (*symbol >= elf_.symbols.size()) return true;
          const std::uint16_t in = elf_.symbols[*symbol].section;
          if (in >= elf_.sections.size() || elf_.sections[in].name != ".text." + kernel) return true;
        }
        add(hash, record);
        return true;
      });
    }
  }

  const Image& image_;
  Elf elf_;
};

// PTX: each `.entry NAME(` names a kernel; all get the text's digest.
std::map<std::string, std::string> ptx_entries(std::string_view text, const std::string& digest) {
  std::map<std::string, std::string> out;
  for (std::size_t at = text.find(".entry"); at != std::string_view::npos; at = text.find(".entry", at + 6)) {
    std::size_t start = at + 6;
    while (start < text.size() && (text[start] == ' ' || text[start] == '\t')) ++start;
    std::size_t end = start;
    while (end < text.size() && text[end] != '(' && text[end] != ' ' && text[end] != '\n' &&
           text[end] != '\t')
      ++end;
    if (end > start) out[std::string(text.substr(start, end - start))] = digest;
  }
  return out;
}

constexpr char kElf64[] = {0x7f, 'E', 'L', 'F', 2, 1};

bool is_elf64(std::string_view image) {
  return image.size() >= 64 && std::memcmp(image.data(), kElf64, sizeof kElf64) == 0;
}

}  // namespace

struct HostImage::Parsed {
  Elf elf;
  std::vector<std::uint64_t> relocated;  // where the loader writes addresses
  const Section* rodata = nullptr;
};

HostImage::HostImage(std::string bytes) : bytes_(std::move(bytes)) {
  if (!is_elf64(bytes_)) throw std::runtime_error("not a 64-bit ELF file");
  auto parsed = std::make_unique<Parsed>();
  const Image image(bytes_);
  parsed->elf = parse(image);
  for (const Section& s : parsed->elf.sections) {
    if (s.type == kShtRela && s.info == 0) {  // dynamic relocations apply to no one section
      for (std::uint64_t at = s.offset; at + 24 <= s.offset + s.size; at += 24)
        parsed->relocated.push_back(image.read<std::uint64_t>(at));
    }
  }
  for (const Section& s : parsed->elf.sections) {
    if (s.name == ".rodata") parsed->rodata = &s;
  }
  parsed_ = std::move(parsed);
}

HostImage::~HostImage() = default;

std::string_view HostImage::rodata_at(std::uint64_t address, std::size_t size) const {
  const Section* s = parsed_->rodata;
  if (s == nullptr || address < s->address || address >= s->address + s->size) return {};
  const std::uint64_t at = address - s->address;
  return std::string_view(bytes_).substr(s->offset + at, std::min<std::uint64_t>(size, s->size - at));
}

std::string HostImage::objects_digest(std::string_view build_root,
                                      const std::function<void(std::string&)>& normalise) const {
  const Elf& elf = parsed_->elf;
  std::map<std::string, std::string> objects;
  for (const Symbol& symbol : elf.symbols) {
    if ((symbol.info & 0xf) != 1 || symbol.size == 0 || symbol.section >= elf.sections.size())
      continue;  // STT_OBJECT
    const Section& s = elf.sections[symbol.section];
    if (s.type == kShtNobits || (s.name != ".rodata" && s.name != ".data" && s.name != ".tdata")) continue;
    if (symbol.value < s.address || symbol.value - s.address + symbol.size > s.size) continue;
    std::string content = bytes_.substr(s.offset + (symbol.value - s.address), symbol.size);
    for (std::uint64_t address : parsed_->relocated) {
      if (address >= symbol.value && address + 8 <= symbol.value + symbol.size)
        std::memset(content.data() + (address - symbol.value), 0, 8);
    }
    if (!build_root.empty()) {
      for (std::size_t at = content.find(build_root); at != std::string::npos;
           at = content.find(build_root, at))
        content.erase(at, build_root.size());
    }
    std::string name = symbol.name;
    if (normalise) {
      normalise(name);
      normalise(content);
    }
    objects[name] += sha256_hex(content);
  }
  Sha256 hash;
  for (const auto& [name, digest] : objects) {
    add(hash, name);
    add(hash, digest);
  }
  return hash.hex();
}

ModuleDigests module_digests(std::string_view image) {
  ModuleDigests out;
  out.image_digest = sha256_hex(image);
  if (is_elf64(image)) {
    try {
      const Image bytes(image);
      out.kernels = CubinDigester(bytes, parse(bytes)).digests();
      out.format = "cubin";
      return out;
    } catch (const std::exception& error) {
      out.problem = std::string("an ELF image kernelwatch cannot read: ") + error.what();
      out.kernels.clear();
      out.format = "other";
      return out;
    }
  }
  if (image.find(".version") != std::string_view::npos && image.find(".entry") != std::string_view::npos) {
    out.format = "ptx";
    out.kernels = ptx_entries(image, out.image_digest);
    return out;
  }
  out.format = "other";
  return out;
}

}  // namespace kw::common
