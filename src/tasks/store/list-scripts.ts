// The read model's list scripts: a page of an owner's tasks (GET /v1/tasks, single node and
// cluster) and a cursor page of one kind (GET /v1/videos). They read the owner's list items that
// scripts.ts's OWNER_ITEMS keeps; numeric replies come from replies.ts.
import { ITEM_SOURCE, LIST_UNCHANGED, PAGE_REPLY } from './replies.js';
import { OWNER_ITEMS } from './scripts.js';

// KEYS: owner index, owner's list items. ARGV: max (exclusive or inclusive lex bound), min, limit,
// the list version of the page the caller keeps ('' for none), task key prefix. Replies
// LIST_UNCHANGED while that version holds (list-pages.ts), else the members' entries, newest
// first, then the list version (nil when the items have none). A member with no entry was
// written by an older release; when one is on the page the entries are pairs instead, an
// ITEM_SOURCE and its text: an entry, the item from the task hash, or the record (a record with
// no item stored at all; the API makes its item).
export const LIST = `${OWNER_ITEMS}
local version, unchanged = list_version(KEYS[2], ARGV[4])
if unchanged then return ${LIST_UNCHANGED} end
local entries, out = {}, nil
local function add(code, text)
  if not out then
    if code == ${ITEM_SOURCE.entry} then entries[#entries + 1] = text return end
    out = {}
    for _, e in ipairs(entries) do out[#out + 1] = ${ITEM_SOURCE.entry}; out[#out + 1] = e end
  end
  out[#out + 1] = code; out[#out + 1] = text
end
local page, complete = page_entries(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if complete then
  page[#page + 1] = version
  return page
end
each_item(KEYS[2], page, #page, function(_, v) add(${ITEM_SOURCE.entry}, v) end, function(id)
  local h = redis.call('HMGET', ARGV[5] .. '{' .. id .. '}', 'l', 'j')
  if h[1] then add(${ITEM_SOURCE.taskHash}, h[1]) elseif h[2] then add(${ITEM_SOURCE.record}, h[2]) end
end)
out = out or entries
out[#out + 1] = version
return out`;

// Cluster mode list. KEYS: owner index, owner's list items. ARGV: max, min, limit, kept version
// (as LIST takes them). Replies LIST_UNCHANGED, or the members' entries, newest first, then the
// list version.
export const LIST_ITEMS = `${OWNER_ITEMS}
local version, unchanged = list_version(KEYS[2], ARGV[4])
if unchanged then return ${LIST_UNCHANGED} end
local page, complete = page_entries(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if not complete then
  local out = {}
  each_item(KEYS[2], page, #page, function(_, v) out[#out + 1] = v end)
  page = out
end
page[#page + 1] = version
return page`;

// Lua shared by both list pages: up to `limit` + 1 members of a lex-ordered owner index from the
// window start, after the cursor (its id and created_at) when there is one, in either order.
const PAGE_MEMBERS = `
local function page_members(index, start, limit, order, cursor, created)
  local lo, hi = start, '+'
  if cursor ~= '' then
    local m = string.format('%010d', created) .. ':' .. cursor
    if order == 'asc' then
      if m > string.sub(start, 2) then lo = '(' .. m end
    else hi = '(' .. m end
  end
  if order == 'asc' then return redis.call('ZRANGE', index, lo, hi, 'BYLEX', 'LIMIT', 0, limit + 1) end
  return redis.call('ZRANGE', index, hi, lo, 'BYLEX', 'REV', 'LIMIT', 0, limit + 1)
end`;

// A cursor page of one owner index (GET /v1/videos), single node. KEYS: owner index, owner's list
// items. ARGV: window start (inclusive lex bound), limit, cursor id ('' for none), 'asc' or 'desc'
// (as PAGE_ITEMS takes them), then task key prefix, owner, kind. The cursor's place comes from its
// own record (checked to be the owner's and this kind), so a page is one round trip; one member
// past the limit says whether more follow. Replies {unknownCursor} for a cursor that is not the owner's, else {found, more or last,
// then per member: id, ITEM_SOURCE and text: its entry | its stored view (a video's item), for a
// member an older release wrote, with no entry | the record (a record with no view stored)}.
export const PAGE = `${PAGE_MEMBERS}${OWNER_ITEMS}
local created
if ARGV[3] ~= '' then
  local h = redis.call('HMGET', ARGV[5] .. '{' .. ARGV[3] .. '}', 'o', 'k', 'v', 'j')
  local doc = h[3] or h[4]
  if not doc or h[1] ~= ARGV[6] or h[2] ~= ARGV[7] then return {${PAGE_REPLY.unknownCursor}} end
  created = cjson.decode(doc).created_at
end
local members = page_members(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[3], created)
local n = math.min(#members, tonumber(ARGV[2]))
local out = {${PAGE_REPLY.found}, #members > n and ${PAGE_REPLY.more} or ${PAGE_REPLY.last}}
local function add(id, code, text) out[#out + 1] = id; out[#out + 1] = code; out[#out + 1] = text end
each_item(KEYS[2], members, n, function(id, v) add(id, ${ITEM_SOURCE.entry}, v) end, function(id)
  local h = redis.call('HMGET', ARGV[5] .. '{' .. id .. '}', 'v', 'j')
  if h[1] then add(id, ${ITEM_SOURCE.taskHash}, h[1]) elseif h[2] then add(id, ${ITEM_SOURCE.record}, h[2]) end
end)
return out`;

// The same page in cluster mode, from the list items kept in the owner's slot. KEYS: owner index,
// owner's list items. ARGV: window start, limit, cursor id, order. Replies {unknownCursor} for an
// unknown cursor, else {found, more or last, then per member: id, entry}.
export const PAGE_ITEMS = `${PAGE_MEMBERS}${OWNER_ITEMS}
local created
if ARGV[3] ~= '' then
  local v = redis.call('HGET', KEYS[2], ARGV[3])
  if not v or entry_expiry(v) <= now_ms() then return {${PAGE_REPLY.unknownCursor}} end
  created = cjson.decode(entry_item(v)).created_at
end
local members = page_members(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[3], created)
local n = math.min(#members, tonumber(ARGV[2]))
local out = {${PAGE_REPLY.found}, #members > n and ${PAGE_REPLY.more} or ${PAGE_REPLY.last}}
each_item(KEYS[2], members, n, function(id, v) out[#out + 1] = id; out[#out + 1] = v end)
return out`;
