import { useEffect, useState } from "react";
import type { PromptImage, Session } from "@agenthost/sdk/web";

/** An image pasted or dropped into the composer, not sent yet. */
export interface DraftImage {
  readonly id: number;
  readonly name: string;
  readonly mediaType: string;
  readonly data: Uint8Array;
  /** An object URL of its bytes, for its thumbnail (revoked when it goes). */
  readonly url: string;
}

/** The types the host takes (it checks the bytes: PNG, JPEG, GIF, WebP). */
export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

let drafted = 0;

/** The image files among pasted or dropped files, read. */
export async function draftImages(files: Iterable<File>): Promise<DraftImage[]> {
  const images = [...files].filter((file) => file.type.startsWith("image/"));
  return Promise.all(
    images.map(async (file) => {
      const data = new Uint8Array(await file.arrayBuffer());
      const url = URL.createObjectURL(new Blob([data], { type: file.type }));
      return { id: ++drafted, name: file.name || `pasted image ${drafted}`, mediaType: file.type, data, url };
    }),
  );
}

export function promptImages(drafts: readonly DraftImage[]): PromptImage[] {
  return drafts.map((d) => ({ data: d.data, name: d.name, mediaType: d.mediaType }));
}

/** Thumbnails of the images a message will send, each removable. */
export function DraftThumbnails({ images, remove }: { images: readonly DraftImage[]; remove: (id: number) => void }) {
  if (images.length === 0) return null;
  return (
    <div className="draft-images" data-testid="draft-images">
      {images.map((image) => (
        <span key={image.id} className="draft-image" data-testid="draft-image" data-name={image.name} title={`${image.name} (${sizeText(image.data.length)})`}>
          <img src={image.url} alt={image.name} />
          <button type="button" data-testid="remove-image" aria-label={`remove ${image.name}`} onClick={() => remove(image.id)}>
            ×
          </button>
        </span>
      ))}
    </div>
  );
}

// The images a session's messages sent, read once per digest (ReadImage).
const shown = new Map<string, Promise<string>>();

function imageUrl(session: Session, digest: string, mediaType: string): Promise<string> {
  const key = `${session.id} ${digest}`;
  let url = shown.get(key);
  if (url === undefined) {
    url = session.readImage(digest).then((image) => URL.createObjectURL(new Blob([new Uint8Array(image.data)], { type: image.mediaType || mediaType })));
    url.catch(() => shown.delete(key)); // asked again when shown again
    shown.set(key, url);
  }
  return url;
}

/** One image a user message sent, as the host keeps it. */
function MessageImage({ session, image }: { session: Session; image: { digest: string; mediaType: string; name: string; size: bigint } }) {
  const [url, setUrl] = useState<string | undefined>(undefined);
  useEffect(() => {
    let live = true;
    imageUrl(session, image.digest, image.mediaType).then(
      (found) => live && setUrl(found),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [session, image.digest, image.mediaType]);
  const label = `${image.name || image.mediaType}, ${sizeText(Number(image.size))}`;
  return (
    <span className="message-image" data-testid="message-image" data-digest={image.digest} title={label}>
      {url === undefined ? `🖼 ${label}` : <img src={url} alt={image.name || "image"} />}
    </span>
  );
}

/** The images a user message sent, under its text. */
export function MessageImages({ session, images }: { session: Session; images: readonly { digest: string; mediaType: string; name: string; size: bigint }[] }) {
  if (images.length === 0) return null;
  return (
    <div className="message-images" data-testid="message-images">
      {images.map((image) => (
        <MessageImage key={image.digest} session={session} image={image} />
      ))}
    </div>
  );
}

export function sizeText(size: number): string {
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${Math.round(size / 1024)} KB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MB`;
}
