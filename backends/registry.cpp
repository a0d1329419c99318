// registry.cpp — placeholder until backend.h lands (issue 4).
namespace lathe { void backends_registry_anchor() {} }
