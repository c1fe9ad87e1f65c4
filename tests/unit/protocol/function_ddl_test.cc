#include "pgsluice/protocol/function_ddl.h"

#include <gtest/gtest.h>

namespace pgsluice::protocol {
namespace {

TEST(FunctionDdl, DdlThatMayChangeWhatANameIs) {
  for (const char* sql :
       {"CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "  create function s.f() returns int language sql as 'select 1'",
        "ALTER FUNCTION f() SET work_mem = '1MB'", "DROP FUNCTION f", "DROP PROCEDURE p",
        "ALTER ROUTINE f RENAME TO g", "CREATE SCHEMA s", "CREATE EXTENSION citext",
        "DROP LANGUAGE plperl", "CrEaTe\tFUNCTION f()"}) {
    EXPECT_TRUE(function_ddl(sql)) << sql;
  }
  for (const char* sql : {"SELECT f()", "CREATE TABLE t (a int)", "DELETE FROM functions",
                          "ALTER TABLE t ADD COLUMN b int", "", "   ", "COMMENT ON FUNCTION f",
                          "DELETE FROM t WHERE kind = 'function'", "createfunction"}) {
    EXPECT_FALSE(function_ddl(sql)) << sql;
  }
}

}  // namespace
}  // namespace pgsluice::protocol
