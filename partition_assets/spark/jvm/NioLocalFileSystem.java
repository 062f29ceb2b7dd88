package partition_assets.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local filesystem, setting a file's permission bits through java.nio rather than a
 * chmod process: without Hadoop's native library (pyspark ships none), its raw local filesystem
 * runs `chmod` for every file and folder it creates, 88 processes for a 12-partition write. It
 * stays a LocalFileSystem (checksum files and all), which Hadoop's FileSystem.getLocal casts to.
 *
 * Not guaranteed: a permission with the sticky bit, which java.nio cannot set, still goes
 * through Hadoop's chmod.
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }

  /** The raw local filesystem under it, with permissions set through java.nio. */
  public static class NioRawLocalFileSystem extends RawLocalFileSystem {
    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) {
        super.setPermission(path, permission);
        return;
      }
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      add(bits, permission.getUserAction(),
          PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
      add(bits, permission.getGroupAction(),
          PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
      add(bits, permission.getOtherAction(),
          PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
      Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
    }

    private static void add(
        Set<PosixFilePermission> bits,
        FsAction action,
        PosixFilePermission read,
        PosixFilePermission write,
        PosixFilePermission execute) {
      if (action.implies(FsAction.READ)) {
        bits.add(read);
      }
      if (action.implies(FsAction.WRITE)) {
        bits.add(write);
      }
      if (action.implies(FsAction.EXECUTE)) {
        bits.add(execute);
      }
    }
  }
}
