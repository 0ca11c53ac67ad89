-- The digest (_digest.lua) of a user's unread hash as a recount begins: replace.lua replaces the
-- hash only if it is unchanged since. KEYS[1] unread hash.
--#include _digest.lua
return digest(KEYS[1])
