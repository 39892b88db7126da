// The part of the NVTX v3 injection interface this plugin implements, declared
// here so the plugin builds without CUDA or NVTX headers (CI has neither).
// Values and layouts are those of NVTX v3's public ABI (nvToolsExt.h,
// nvtxDetail/nvtxTypes.h); they are frozen by NVTX's compatibility promise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cwchar>

namespace nvtx_abi {

// Export tables a tool asks the NVTX library for.
constexpr uint32_t kExportTableCallbacks = 1;

// Callback modules and the slots this plugin fills.
constexpr int kModuleCore = 1;
constexpr int kModuleCore2 = 5;

enum CoreSlot : unsigned {
  kMarkEx = 1, kMarkA = 2, kMarkW = 3,
  kRangeStartEx = 4, kRangeStartA = 5, kRangeStartW = 6, kRangeEnd = 7,
  kRangePushEx = 8, kRangePushA = 9, kRangePushW = 10, kRangePop = 11,
};

enum Core2Slot : unsigned {
  kDomainMarkEx = 1, kDomainRangeStartEx = 2, kDomainRangeEnd = 3,
  kDomainRangePushEx = 4, kDomainRangePop = 5,
  kDomainRegisterStringA = 10, kDomainRegisterStringW = 11,
  kDomainCreateA = 12, kDomainCreateW = 13, kDomainDestroy = 14,
};

// nvtxMessageType_t
constexpr int32_t kMessageAscii = 1;
constexpr int32_t kMessageUnicode = 2;
constexpr int32_t kMessageRegistered = 3;

// nvtxEventAttributes_v2: only messageType and message are read.
struct EventAttributes {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  uint64_t payload;
  int32_t message_type;
  union {
    const char* ascii;
    const wchar_t* unicode;
    const void* registered;
  } message;
};
static_assert(offsetof(EventAttributes, message_type) == 32, "nvtxEventAttributes_v2 layout");
static_assert(offsetof(EventAttributes, message) == 40, "nvtxEventAttributes_v2 layout");

using FunctionPointer = void (*)();
using FunctionTable = FunctionPointer**;  // table[slot] points at the slot's function pointer

struct ExportTableCallbacks {
  size_t struct_size;
  int (*GetModuleFunctionTable)(int module, FunctionTable* out_table, unsigned* out_size);
};

using GetExportTable = const void* (*)(uint32_t export_table_id);

}  // namespace nvtx_abi
