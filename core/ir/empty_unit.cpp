// empty_unit.cpp — keeps a core sub-library non-empty while its folder has no sources yet.
